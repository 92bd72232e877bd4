/**
 * Starknet JSON-RPC (spec 0.10 shapes, fees in FRI) for the local ledger,
 * over HTTP on loopback: what starknet.js 10's `RpcProvider` and `Account`
 * send, single or batched, with named parameters (an object) or positional
 * ones (an array, in the specification's order), as JSON-RPC 2.0 and real
 * nodes take both. Errors carry the spec's
 * codes (20 contract not found, 24 block not found, 29 transaction hash not
 * found, 40 contract error, 41 transaction execution error, 52 invalid
 * nonce, 54 insufficient balance, 55 validation failure, 59 duplicate).
 * Simulations run at `latest` or `pre_confirmed` alike: the block being
 * built holds nothing here until it closes.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  SEQUENCER_ADDRESS,
  StarknetRpcFailure,
  toHex,
  type Block,
  type RpcInvokeV3,
  type StarknetLedger,
} from "./ledger.js";

const SPEC_VERSION = "0.10.0";

type Params = Record<string, unknown>;

function felt(v: unknown, what: string): bigint {
  try {
    if (typeof v === "string" || typeof v === "number") return BigInt(v);
  } catch {
    // falls through to the error below
  }
  throw new StarknetRpcFailure(-32602, `Invalid params: ${what} must be a felt`);
}

type BlockRef = { tag: "latest" | "pre_confirmed" } | { block: Block };

function blockRef(ledger: StarknetLedger, id: unknown): BlockRef {
  if (id === undefined || id === "latest" || id === "l1_accepted") return { tag: "latest" };
  if (id === "pre_confirmed" || id === "pending") return { tag: "pre_confirmed" };
  if (typeof id === "object" && id !== null) {
    const o = id as Record<string, unknown>;
    const found =
      "block_number" in o
        ? ledger.blocks[Number(o["block_number"])]
        : "block_hash" in o
          ? ledger.blocks.find((b) => BigInt(b.hash) === felt(o["block_hash"], "block_hash"))
          : undefined;
    if (found) return { block: found };
  }
  throw new StarknetRpcFailure(24, "Block not found");
}

function blockHeader(ledger: StarknetLedger, b: Block) {
  const fri = (p: bigint) => ({ price_in_fri: toHex(p), price_in_wei: toHex(p / 1000n || 1n) });
  return {
    status: "ACCEPTED_ON_L2",
    block_hash: b.hash,
    parent_hash: b.parentHash,
    block_number: b.number,
    new_root: "0x0",
    timestamp: b.timestamp,
    sequencer_address: toHex(SEQUENCER_ADDRESS),
    l1_gas_price: fri(ledger.gasPrices.l1),
    l2_gas_price: fri(ledger.gasPrices.l2),
    l1_data_gas_price: fri(ledger.gasPrices.l1Data),
    l1_da_mode: "BLOB",
    starknet_version: "0.14.0",
  };
}

/** The block being built: no hash or root yet, and (here) nothing in it until it closes. */
function preConfirmedBlock(ledger: StarknetLedger) {
  const {
    status: _s,
    block_hash: _h,
    parent_hash: _p,
    new_root: _r,
    ...rest
  } = blockHeader(ledger, ledger.latest);
  return {
    ...rest,
    block_number: ledger.latest.number + 1,
    timestamp: Math.floor(Date.now() / 1000),
    transactions: [],
  };
}

export function starknetHandlers(ledger: StarknetLedger): Record<string, (p: Params) => unknown> {
  /** A receipt without its block's hash and number, as a block with receipts carries it. */
  const blockReceipt = (rec: NonNullable<ReturnType<StarknetLedger["transaction"]>>) => ({
    type: "INVOKE",
    transaction_hash: rec.hash,
    actual_fee: { amount: toHex(rec.fee), unit: "FRI" },
    execution_status: rec.execution,
    finality_status: rec.finality,
    messages_sent: [],
    events: rec.events,
    execution_resources: rec.resources,
    ...(rec.revertReason !== undefined ? { revert_reason: rec.revertReason } : {}),
  });
  const receipt = (hash: unknown) => {
    const rec = ledger.transaction(toHex(felt(hash, "transaction_hash")));
    if (!rec || rec.finality === "RECEIVED") {
      throw new StarknetRpcFailure(29, "Transaction hash not found");
    }
    return { ...blockReceipt(rec), block_hash: rec.blockHash, block_number: rec.blockNumber };
  };
  const flags = (p: Params) =>
    Array.isArray(p["simulation_flags"]) ? (p["simulation_flags"] as string[]) : [];
  return {
    starknet_specVersion: () => SPEC_VERSION,
    starknet_chainId: () => toHex(ledger.chainId),
    starknet_syncing: () => false,
    starknet_blockNumber: () => ledger.latest.number,
    starknet_blockHashAndNumber: () => ({
      block_hash: ledger.latest.hash,
      block_number: ledger.latest.number,
    }),
    starknet_getBlockWithTxHashes: (p) => {
      const ref = blockRef(ledger, p["block_id"]);
      if ("tag" in ref && ref.tag === "pre_confirmed") return preConfirmedBlock(ledger);
      const b = "block" in ref ? ref.block : ledger.latest;
      return { ...blockHeader(ledger, b), transactions: b.transactions };
    },
    // What starknet.js's Account reads to choose a tip when none is given.
    starknet_getBlockWithTxs: (p) => {
      const ref = blockRef(ledger, p["block_id"]);
      const b = "block" in ref ? ref.block : ledger.latest;
      return {
        ...blockHeader(ledger, b),
        transactions: b.transactions.map((h) => ({
          transaction_hash: h,
          ...ledger.transaction(h)?.tx,
        })),
      };
    },
    // Every transaction of a block with its receipt: what a watcher reads once per block.
    starknet_getBlockWithReceipts: (p) => {
      const ref = blockRef(ledger, p["block_id"]);
      if ("tag" in ref && ref.tag === "pre_confirmed") return preConfirmedBlock(ledger);
      const b = "block" in ref ? ref.block : ledger.latest;
      return {
        ...blockHeader(ledger, b),
        transactions: b.transactions.flatMap((h) => {
          const rec = ledger.transaction(h);
          return rec
            ? [{ transaction: { transaction_hash: h, ...rec.tx }, receipt: blockReceipt(rec) }]
            : [];
        }),
      };
    },
    starknet_getClassHashAt: (p) => {
      blockRef(ledger, p["block_id"]);
      return ledger.classHashAt(felt(p["contract_address"], "contract_address"));
    },
    starknet_getNonce: (p) => {
      const ref = blockRef(ledger, p["block_id"]);
      const pre = "tag" in ref && ref.tag === "pre_confirmed";
      return toHex(ledger.nonceAt(felt(p["contract_address"], "contract_address"), pre));
    },
    starknet_call: (p) => {
      blockRef(ledger, p["block_id"]);
      const r = p["request"] as Params | undefined;
      if (!r || !Array.isArray(r["calldata"])) {
        throw new StarknetRpcFailure(-32602, "Invalid params: request needs calldata");
      }
      return ledger.call(
        felt(r["contract_address"], "contract_address"),
        felt(r["entry_point_selector"], "entry_point_selector"),
        (r["calldata"] as unknown[]).map((c) => felt(c, "calldata")),
      );
    },
    starknet_estimateFee: (p) => {
      blockRef(ledger, p["block_id"]);
      if (!Array.isArray(p["request"])) {
        throw new StarknetRpcFailure(-32602, "Invalid params: request must be an array");
      }
      return ledger.estimateFee(p["request"] as RpcInvokeV3[], flags(p));
    },
    starknet_simulateTransactions: (p) => {
      blockRef(ledger, p["block_id"]);
      if (!Array.isArray(p["transactions"])) {
        throw new StarknetRpcFailure(-32602, "Invalid params: transactions must be an array");
      }
      return ledger.simulate(p["transactions"] as RpcInvokeV3[], flags(p));
    },
    starknet_addInvokeTransaction: (p) => ({
      transaction_hash: ledger.addInvoke(p["invoke_transaction"] as RpcInvokeV3),
    }),
    starknet_getTransactionReceipt: (p) => receipt(p["transaction_hash"]),
    starknet_getTransactionStatus: (p) => {
      const rec = ledger.transaction(toHex(felt(p["transaction_hash"], "transaction_hash")));
      if (!rec) throw new StarknetRpcFailure(29, "Transaction hash not found");
      return rec.finality === "RECEIVED"
        ? { finality_status: "RECEIVED" }
        : {
            finality_status: rec.finality,
            execution_status: rec.execution,
            ...(rec.revertReason !== undefined ? { failure_reason: rec.revertReason } : {}),
          };
    },
    // A mined transaction's trace: a reverted one's `execute_invocation` is its revert reason.
    starknet_traceTransaction: (p) => {
      const rec = ledger.transaction(toHex(felt(p["transaction_hash"], "transaction_hash")));
      if (!rec?.trace) throw new StarknetRpcFailure(29, "Transaction hash not found");
      return rec.trace;
    },
    starknet_getTransactionByHash: (p) => {
      const rec = ledger.transaction(toHex(felt(p["transaction_hash"], "transaction_hash")));
      if (!rec) throw new StarknetRpcFailure(29, "Transaction hash not found");
      return { transaction_hash: rec.hash, ...rec.tx };
    },
  };
}

/**
 * Each method's parameters in the order the specification lists them: what
 * a positional (array) call means. Optional ones come last, as there.
 */
export const PARAMETER_ORDER: Record<string, readonly string[]> = {
  starknet_specVersion: [],
  starknet_chainId: [],
  starknet_syncing: [],
  starknet_blockNumber: [],
  starknet_blockHashAndNumber: [],
  starknet_getBlockWithTxHashes: ["block_id"],
  starknet_getBlockWithTxs: ["block_id"],
  starknet_getBlockWithReceipts: ["block_id"],
  starknet_getClassHashAt: ["block_id", "contract_address"],
  starknet_getNonce: ["block_id", "contract_address"],
  starknet_call: ["request", "block_id"],
  starknet_estimateFee: ["request", "simulation_flags", "block_id"],
  starknet_simulateTransactions: ["block_id", "transactions", "simulation_flags", "trace_flags"],
  starknet_addInvokeTransaction: ["invoke_transaction"],
  starknet_getTransactionReceipt: ["transaction_hash"],
  starknet_getTransactionStatus: ["transaction_hash"],
  starknet_getTransactionByHash: ["transaction_hash"],
  starknet_traceTransaction: ["transaction_hash"],
};

/** A call's parameters by name, however it gave them; a string naming the fault otherwise. */
function namedParams(method: string, params: unknown): Params | string {
  if (params === undefined || params === null) return {};
  if (Array.isArray(params)) {
    const names = PARAMETER_ORDER[method] ?? [];
    if (params.length > names.length) {
      return `Invalid params: ${method} takes at most ${names.length} parameters (${names.join(", ") || "none"}), got ${params.length}`;
    }
    return Object.fromEntries(params.map((v, i) => [names[i]!, v] as const));
  }
  if (typeof params === "object") return params as Params;
  return "Invalid params: params must be an object (by name) or an array (by position)";
}

interface JsonRpcRequest {
  jsonrpc?: string;
  id?: unknown;
  method?: unknown;
  params?: unknown;
}

function answer(handlers: Record<string, (p: Params) => unknown>, req: JsonRpcRequest) {
  const id = req.id ?? null;
  const handler = typeof req.method === "string" ? handlers[req.method] : undefined;
  if (!handler) {
    return { jsonrpc: "2.0", id, error: { code: -32601, message: "Method not found" } };
  }
  const params = namedParams(req.method as string, req.params);
  if (typeof params === "string") {
    return { jsonrpc: "2.0", id, error: { code: -32602, message: params } };
  }
  try {
    return { jsonrpc: "2.0", id, result: handler(params) };
  } catch (e) {
    if (e instanceof StarknetRpcFailure) {
      return {
        jsonrpc: "2.0",
        id,
        error: {
          code: e.code,
          message: e.message,
          ...(e.data !== undefined ? { data: e.data } : {}),
        },
      };
    }
    return { jsonrpc: "2.0", id, error: { code: -32603, message: `Internal error: ${String(e)}` } };
  }
}

export interface ServedStarknet {
  rpcUrl: string;
  close(): Promise<void>;
}

export async function serveStarknet(ledger: StarknetLedger, port = 0): Promise<ServedStarknet> {
  const handlers = starknetHandlers(ledger);
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      let body: unknown;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        body = undefined;
      }
      const out =
        body === undefined || typeof body !== "object" || body === null
          ? { jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } }
          : Array.isArray(body)
            ? body.map((r) => answer(handlers, r as JsonRpcRequest))
            : answer(handlers, body as JsonRpcRequest);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(out));
    });
  });
  await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
  return {
    rpcUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
