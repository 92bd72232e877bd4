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
  getBase58Decoder,
  getBase58Encoder,
  getBase64Decoder,
  getBase64Encoder,
  getCompiledTransactionMessageDecoder,
  unwrapOption,
  type Address,
} from "@solana/kit";
import { TOKEN_PROGRAM_ADDRESS, getMintDecoder, getTokenDecoder } from "@solana-program/token";
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

/**
 * A landed transaction in the encoding asked for, as a validator answers
 * `getTransaction`: `json` (the default) and `jsonParsed` as objects (no
 * program parsers here: `jsonParsed` instructions come in their unparsed
 * form, `{ programId, accounts, data }`, as a validator gives them for a
 * program it cannot parse), `base64` and `base58` as the whole wire
 * transaction.
 */
function encodedTransaction(
  t: { messageBytes: Uint8Array; signatures: string[] },
  message: ReturnType<ReturnType<typeof getCompiledTransactionMessageDecoder>["decode"]>,
  options: unknown,
): unknown {
  const encoding = (options as { encoding?: unknown } | undefined)?.encoding ?? "json";
  const signatures = t.signatures;
  if (encoding === "base64" || encoding === "base58") {
    const sigBytes = signatures.map((x) => new Uint8Array(getBase58Encoder().encode(x)));
    const wire = new Uint8Array([
      signatures.length,
      ...sigBytes.flatMap((b) => [...b]),
      ...t.messageBytes,
    ]);
    return encoding === "base64"
      ? [getBase64Decoder().decode(wire), "base64"]
      : [getBase58Decoder().decode(wire), "base58"];
  }
  if (encoding !== "json" && encoding !== "jsonParsed") {
    throw new RpcError(-32602, `Invalid params: encoding ${String(encoding)} is not served here`);
  }
  if (!("instructions" in message)) {
    throw new RpcError(-32602, "Invalid params: version 1 transactions are served in base64 only");
  }
  const keys = message.staticAccounts;
  const { numSignerAccounts, numReadonlySignerAccounts, numReadonlyNonSignerAccounts } =
    message.header;
  const instructions = message.instructions.map((ix) => {
    const data = getBase58Decoder().decode(ix.data ?? new Uint8Array());
    const accounts = ix.accountIndices ?? [];
    return encoding === "json"
      ? { programIdIndex: ix.programAddressIndex, accounts, data, stackHeight: null }
      : {
          programId: keys[ix.programAddressIndex],
          accounts: accounts.map((i) => keys[i]),
          data,
          stackHeight: null,
        };
  });
  const writable = (i: number) =>
    i < numSignerAccounts
      ? i < numSignerAccounts - numReadonlySignerAccounts
      : i < keys.length - numReadonlyNonSignerAccounts;
  const lookups = (message.version === 0 ? (message.addressTableLookups ?? []) : []).map((l) => ({
    accountKey: l.lookupTableAddress,
    writableIndexes: l.writableIndexes,
    readonlyIndexes: l.readonlyIndexes,
  }));
  return {
    signatures,
    message: {
      accountKeys:
        encoding === "json"
          ? keys
          : keys.map((pubkey, i) => ({
              pubkey,
              signer: i < numSignerAccounts,
              writable: writable(i),
              source: "transaction",
            })),
      header: {
        numRequiredSignatures: numSignerAccounts,
        numReadonlySignedAccounts: numReadonlySignerAccounts,
        numReadonlyUnsignedAccounts: numReadonlyNonSignerAccounts,
      },
      instructions,
      recentBlockhash: message.lifetimeToken,
      ...(message.version === 0 ? { addressTableLookups: lookups } : {}),
    },
  };
}

export function solanaRpcHandlers(ledger: SolanaLedger, genesisHash: string) {
  const context = () => ({ slot: num(ledger.slot), apiVersion: "2.2.0" });
  const accountValue = (of: Address, options?: unknown) => {
    const acc = ledger.account(of);
    if (!acc.exists) return null;
    return {
      data: encodedData(acc.programAddress, acc.data, options),
      executable: acc.executable,
      lamports: num(acc.lamports),
      owner: acc.programAddress,
      rentEpoch: 0,
      space: acc.data.length,
    };
  };
  /**
   * Account data in the encoding asked for, as a validator answers it: no
   * encoding is the legacy `binary` (a plain base58 string), `base58` and
   * `base64` come as `[data, encoding]` (base58 only up to 128 bytes), and
   * `jsonParsed` parses SPL Token accounts and mints (what the official x402
   * client reads balances with) and falls back to base64 for the rest.
   */
  const encodedData = (owner: string, data: Uint8Array, options: unknown): unknown => {
    const encoding = (options as { encoding?: unknown } | undefined)?.encoding ?? "binary";
    const base58 = () => {
      if (data.length > 128) {
        throw new RpcError(
          -32600,
          "Encoded binary (base 58) data should be less than 128 bytes, please use Base64 encoding.",
        );
      }
      return getBase58Decoder().decode(data);
    };
    switch (encoding) {
      case "binary":
        return base58();
      case "base58":
        return [base58(), "base58"];
      case "base64":
        return [getBase64Decoder().decode(data), "base64"];
      case "jsonParsed":
        return parsedToken(owner, data) ?? [getBase64Decoder().decode(data), "base64"];
      default:
        throw new RpcError(
          -32602,
          `Invalid params: encoding ${String(encoding)} is not served here`,
        );
    }
  };
  const parsedToken = (owner: string, data: Uint8Array) => {
    if (owner !== TOKEN_PROGRAM_ADDRESS) return undefined;
    const ui = (amount: bigint, decimals: number) => {
      const s = (Number(amount) / 10 ** decimals).toString();
      return { amount: amount.toString(), decimals, uiAmount: Number(s), uiAmountString: s };
    };
    try {
      if (data.length === 82) {
        const m = getMintDecoder().decode(data);
        return {
          program: "spl-token",
          parsed: {
            type: "mint",
            info: {
              decimals: m.decimals,
              freezeAuthority: unwrapOption(m.freezeAuthority),
              isInitialized: m.isInitialized,
              mintAuthority: unwrapOption(m.mintAuthority),
              supply: m.supply.toString(),
            },
          },
          space: data.length,
        };
      }
      if (data.length === 165) {
        const t = getTokenDecoder().decode(data);
        const mint = ledger.account(t.mint);
        const decimals = mint.exists ? getMintDecoder().decode(mint.data).decimals : 0;
        const delegate = unwrapOption(t.delegate);
        return {
          program: "spl-token",
          parsed: {
            type: "account",
            info: {
              isNative: unwrapOption(t.isNative) !== null,
              mint: t.mint,
              owner: t.owner,
              state: ["uninitialized", "initialized", "frozen"][t.state] ?? "initialized",
              tokenAmount: ui(t.amount, decimals),
              ...(delegate ? { delegate, delegatedAmount: ui(t.delegatedAmount, decimals) } : {}),
            },
          },
          space: data.length,
        };
      }
    } catch {
      // Not a token account after all: the base64 fallback, as a validator.
    }
    return undefined;
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
    getAccountInfo: ([who, options]) => ({
      context: context(),
      value: accountValue(addr(who), options),
    }),
    getMultipleAccounts: ([list, options]) => ({
      context: context(),
      value: (Array.isArray(list) ? list : []).map((a) => accountValue(addr(a), options)),
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
    getTransaction: ([sig, options]) => {
      const t = ledger.transaction(String(sig));
      if (!t) return null;
      const message = getCompiledTransactionMessageDecoder().decode(t.messageBytes);
      return {
        ...(options && typeof options === "object" && "maxSupportedTransactionVersion" in options
          ? { version: message.version }
          : {}),
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
        transaction: encodedTransaction(t, message, options),
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
    // Solana's methods take positional parameters only (a configuration
    // object rides as the last one): a map is refused, as a validator does,
    // rather than run as if no parameters were given.
    if (call.params !== undefined && call.params !== null && !Array.isArray(call.params)) {
      return {
        jsonrpc: "2.0",
        id: call.id ?? null,
        error: { code: -32602, message: "Invalid params: invalid type: map, expected a sequence" },
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
