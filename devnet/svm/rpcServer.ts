/**
 * The Solana JSON-RPC methods that `@solana/kit`, the official x402 client
 * and facilitator, the reconciler and the tests call, served over HTTP on
 * loopback for a `SolanaLedger`. Numbers (u64) are JSON integers and account
 * data is base64, as a validator answers. An unknown method is JSON-RPC
 * error -32601, so a client that needs more says so plainly.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  address,
  getBase58Encoder,
  getBase64Decoder,
  getBase64Encoder,
  type Address,
} from "@solana/kit";
import { getMintDecoder, getTokenDecoder } from "@solana-program/token";
import type { SolanaLedger } from "./ledger.js";

class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

type Params = unknown[];

function num(v: bigint): number {
  return Number(v);
}

function wireBytes(encoded: unknown, options: unknown): Uint8Array {
  if (typeof encoded !== "string") throw new RpcError(-32602, "transaction must be a string");
  const encoding = (options as { encoding?: string } | undefined)?.encoding ?? "base58";
  try {
    return new Uint8Array(
      encoding === "base64"
        ? getBase64Encoder().encode(encoded)
        : getBase58Encoder().encode(encoded),
    );
  } catch {
    throw new RpcError(-32602, `invalid transaction: could not decode ${encoding}`);
  }
}

export function solanaRpcHandlers(ledger: SolanaLedger, genesisHash: string) {
  const context = () => ({ slot: num(ledger.slot), apiVersion: "2.2.0" });
  const accountValue = (of: Address) => {
    const acc = ledger.account(of);
    if (!acc.exists) return null;
    return {
      data: [getBase64Decoder().decode(acc.data), "base64"],
      executable: acc.executable,
      lamports: num(acc.lamports),
      owner: acc.programAddress,
      rentEpoch: 0,
      space: acc.data.length,
    };
  };
  const addr = (v: unknown): Address => {
    try {
      return address(String(v));
    } catch {
      throw new RpcError(-32602, `Invalid param: ${String(v)} is not a base58 address`);
    }
  };

  const handlers: Record<string, (params: Params) => unknown> = {
    getHealth: () => "ok",
    getVersion: () => ({ "solana-core": "2.2.0", "feature-set": 0 }),
    getGenesisHash: () => genesisHash,
    getSlot: () => num(ledger.slot),
    getBlockHeight: () => num(ledger.blockHeight),
    getEpochInfo: () => ({
      absoluteSlot: num(ledger.slot),
      blockHeight: num(ledger.blockHeight),
      epoch: 0,
      slotIndex: num(ledger.slot),
      slotsInEpoch: 432_000,
      transactionCount: null,
    }),
    getLatestBlockhash: () => {
      const { blockhash, lastValidBlockHeight } = ledger.latestBlockhash();
      return {
        context: context(),
        value: { blockhash, lastValidBlockHeight: num(lastValidBlockHeight) },
      };
    },
    isBlockhashValid: ([hash]) => ({
      context: context(),
      value: ledger.isBlockhashValid(String(hash)),
    }),
    getMinimumBalanceForRentExemption: ([len]) =>
      num(ledger.svm.minimumBalanceForRentExemption(BigInt(Number(len ?? 0)))),
    getBalance: ([who]) => ({
      context: context(),
      value: num(ledger.svm.getBalance(addr(who)) ?? 0n),
    }),
    getAccountInfo: ([who]) => ({ context: context(), value: accountValue(addr(who)) }),
    getMultipleAccounts: ([list]) => ({
      context: context(),
      value: (Array.isArray(list) ? list : []).map((a) => accountValue(addr(a))),
    }),
    getTokenAccountBalance: ([who]) => {
      const acc = ledger.account(addr(who));
      if (!acc.exists) throw new RpcError(-32602, "Invalid param: could not find account");
      const token = getTokenDecoder().decode(acc.data);
      const mint = ledger.account(token.mint);
      const decimals = mint.exists ? getMintDecoder().decode(mint.data).decimals : 0;
      const amount = token.amount.toString();
      const ui = Number(token.amount) / 10 ** decimals;
      return {
        context: context(),
        value: { amount, decimals, uiAmount: ui, uiAmountString: String(ui) },
      };
    },
    requestAirdrop: ([who, amount]) => ledger.airdrop(String(addr(who)), BigInt(Number(amount))),
    simulateTransaction: ([encoded, options]) => {
      const o = (options ?? {}) as { sigVerify?: boolean; replaceRecentBlockhash?: boolean };
      if (o.sigVerify && o.replaceRecentBlockhash) {
        throw new RpcError(-32602, "sigVerify may not be used with replaceRecentBlockhash");
      }
      const result = ledger.simulate(
        wireBytes(encoded, options),
        o.sigVerify ?? false,
        o.replaceRecentBlockhash ?? false,
      );
      return {
        context: context(),
        value: {
          err: result.err === null ? null : String(result.err),
          logs: result.logs,
          accounts: null,
          unitsConsumed: num(result.unitsConsumed),
          returnData: null,
          innerInstructions: null,
        },
      };
    },
    sendTransaction: ([encoded, options]) => {
      const outcome = ledger.send(wireBytes(encoded, options));
      if (outcome.ok) return outcome.signature;
      throw new RpcError(outcome.code, outcome.error, { err: outcome.error, logs: outcome.logs });
    },
    getSignatureStatuses: ([list]) => ({
      context: context(),
      value: (Array.isArray(list) ? list : []).map((sig) => {
        const s = ledger.status(String(sig));
        return s
          ? {
              slot: num(s.slot),
              confirmations: s.confirmations,
              err: s.err === null ? null : String(s.err),
              status: s.err === null ? { Ok: null } : { Err: String(s.err) },
              confirmationStatus: s.confirmationStatus,
            }
          : null;
      }),
    }),
    getTransaction: ([sig]) => {
      const t = ledger.transaction(String(sig));
      if (!t) return null;
      return {
        slot: num(t.slot),
        blockTime: Math.floor(Date.now() / 1000),
        meta: {
          err: t.err === null ? null : String(t.err),
          fee: num(t.fee),
          logMessages: t.logs,
          innerInstructions: [],
          preBalances: [],
          postBalances: [],
          status: t.err === null ? { Ok: null } : { Err: String(t.err) },
        },
        transaction: [getBase64Decoder().decode(t.messageBytes), "base64"],
        signatures: t.signatures,
      };
    },
  };
  return handlers;
}

export interface SolanaRpcServer {
  url: string;
  server: Server;
  close(): Promise<void>;
}

/** Serves the handlers on 127.0.0.1 (port 0 picks a free one). */
export async function serveSolanaRpc(
  handlers: Record<string, (params: Params) => unknown>,
  port = 0,
): Promise<SolanaRpcServer> {
  const answer = (id: unknown, run: () => unknown) => {
    try {
      return { jsonrpc: "2.0", id, result: run() };
    } catch (e) {
      const err =
        e instanceof RpcError
          ? { code: e.code, message: e.message, ...(e.data ? { data: e.data } : {}) }
          : { code: -32603, message: e instanceof Error ? e.message : String(e) };
      return { jsonrpc: "2.0", id, error: err };
    }
  };
  const one = (call: { id?: unknown; method?: unknown; params?: unknown }) => {
    const method = typeof call.method === "string" ? call.method : "";
    const handler = handlers[method];
    if (!handler) {
      return {
        jsonrpc: "2.0",
        id: call.id ?? null,
        error: { code: -32601, message: `Method not found: ${method}` },
      };
    }
    return answer(call.id ?? null, () => handler(Array.isArray(call.params) ? call.params : []));
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      let body: unknown;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        body = undefined;
      }
      const reply =
        body === undefined
          ? { jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } }
          : Array.isArray(body)
            ? body.map((c) => one(c as never))
            : one(body as never);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(reply));
    });
  });
  await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    server,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
