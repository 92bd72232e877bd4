/**
 * nearcore's JSON-RPC for the local NEAR chain, on loopback over HTTP: the
 * methods relayers and wallets use (`status`, `block`, `gas_price`, `query`
 * with `view_account` / `view_access_key` / `view_access_key_list` /
 * `call_function` / `view_code`, `send_tx`, `broadcast_tx_async`,
 * `broadcast_tx_commit`, `tx`, `EXPERIMENTAL_tx_status`), with nearcore's
 * answer and error shapes (`{ name, cause: { name, info }, code, message,
 * data }`), and `wait_until` honoured up to a timeout, as a node does.
 *
 * Parameters come as nearcore takes them: by name (an object), or in the
 * older positional forms it still accepts and client libraries still send
 * (`near-api-js`'s `query(path, data)` and `gasPrice` among them): `block`
 * `[block_id]`, `gas_price` `[block_id | null]`, `query` `[path, data]`
 * (`account/<id>`, `access_key/<id>[/<key>]`, `call/<id>/<method>` with
 * base58 arguments, `code/<id>`), the sends `[signed_tx_base64]`, and `tx` /
 * `EXPERIMENTAL_tx_status` `[tx_hash, sender_account_id]`.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { baseDecode } from "@near-js/utils";
import { ContractPanic } from "./fungibleToken.js";
import { InvalidTransaction, keyOf, type Block, type NearLedger, type TxRecord } from "./ledger.js";

type Params = Record<string, unknown>;

/** A handler error, as nearcore reports it. */
class RpcError extends Error {
  constructor(
    readonly causeName: string,
    readonly info: Record<string, unknown>,
    message: string,
    readonly kind:
      "HANDLER_ERROR" | "REQUEST_VALIDATION_ERROR" | "INTERNAL_ERROR" = "HANDLER_ERROR",
    readonly httpStatus = 200,
  ) {
    super(message);
  }
}

const STAGES = [
  "NONE",
  "INCLUDED",
  "EXECUTED_OPTIMISTIC",
  "INCLUDED_FINAL",
  "EXECUTED",
  "FINAL",
] as const;
type Stage = (typeof STAGES)[number];

function rank(stage: string): number {
  const i = STAGES.indexOf(stage as Stage);
  return i < 0 ? STAGES.indexOf("EXECUTED_OPTIMISTIC") : i;
}

function blockView(b: Block) {
  return {
    author: "devnet.near",
    header: {
      height: b.height,
      hash: b.hash,
      prev_hash: b.prevHash,
      timestamp: Number(b.timestampNs),
      timestamp_nanosec: b.timestampNs.toString(),
      gas_price: "100000000",
      chunks_included: 1,
      epoch_id: "11111111111111111111111111111111",
    },
    chunks: [],
  };
}

function pickBlock(ledger: NearLedger, p: Params): Block {
  const id = p["block_id"];
  if (id !== undefined && id !== null) {
    const b =
      typeof id === "number"
        ? ledger.blockAt({ height: id })
        : ledger.blockAt({ hash: String(id) });
    if (!b)
      throw new RpcError(
        "UNKNOWN_BLOCK",
        { block_reference: { block_id: id } },
        `DB Not Found Error: block ${String(id)}`,
      );
    return b;
  }
  return p["finality"] === "final" ? ledger.final : ledger.head;
}

const badParams = (message: string) =>
  new RpcError("PARSE_ERROR", {}, message, "REQUEST_VALIDATION_ERROR", 400);

/** A legacy `query` path (`account/<id>` …) as the named request it stands for. */
function queryPath(path: unknown, data: unknown): Params {
  const parts = typeof path === "string" ? path.split("/") : [];
  const [kind, accountId, rest] = [parts[0], parts[1], parts.slice(2).join("/")];
  // Path queries read the latest block, as nearcore answers them.
  const at = { finality: "optimistic" };
  if (kind === "account" && accountId && !rest)
    return { ...at, request_type: "view_account", account_id: accountId };
  if (kind === "access_key" && accountId && rest)
    return { ...at, request_type: "view_access_key", account_id: accountId, public_key: rest };
  if (kind === "access_key" && accountId)
    return { ...at, request_type: "view_access_key_list", account_id: accountId };
  if (kind === "code" && accountId && !rest)
    return { ...at, request_type: "view_code", account_id: accountId };
  if (kind === "call" && accountId && rest) {
    let args: Uint8Array;
    try {
      args = typeof data === "string" && data !== "" ? baseDecode(data) : new Uint8Array();
    } catch {
      throw badParams("the arguments of a call query must be base58");
    }
    return {
      ...at,
      request_type: "call_function",
      account_id: accountId,
      method_name: rest,
      args_base64: Buffer.from(args).toString("base64"),
    };
  }
  throw badParams(`unknown query path ${String(path)}`);
}

/** A call's parameters by name, from either form nearcore accepts for its method. */
function namedParams(method: string, params: unknown): Params {
  if (params === undefined || params === null) return {};
  if (!Array.isArray(params)) {
    if (typeof params === "object") return params as Params;
    throw badParams("params must be an object or an array");
  }
  switch (method) {
    case "status":
      return {};
    case "block":
    case "gas_price":
      if (params.length > 1) break;
      return params[0] === undefined || params[0] === null ? {} : { block_id: params[0] };
    case "query":
      if (params.length !== 2) break;
      return queryPath(params[0], params[1]);
    case "send_tx":
    case "broadcast_tx_async":
    case "broadcast_tx_commit":
      if (params.length !== 1) break;
      return { signed_tx_base64: params[0] };
    case "tx":
    case "EXPERIMENTAL_tx_status":
      if (params.length !== 2) break;
      return { tx_hash: params[0], sender_account_id: params[1] };
  }
  throw badParams(`${method} does not take these positional parameters`);
}

function txView(r: TxRecord) {
  const tx = r.signed.transaction;
  return {
    signer_id: tx.signerId,
    public_key: keyOf(tx.publicKey).toString(),
    nonce: Number(tx.nonce),
    receiver_id: tx.receiverId,
    actions: [],
    signature: "",
    hash: r.hash,
  };
}

function nearHandlers(ledger: NearLedger, opts: { waitTimeoutMs: number }) {
  const outcomeOf = (r: TxRecord, withReceipts: boolean) => {
    const stage = ledger.stage(r.hash) ?? "NONE";
    // In the pool, not in a block yet: known, with no outcome.
    if (stage === "NONE") return { final_execution_status: stage };
    return {
      final_execution_status: stage,
      status: r.status,
      transaction: txView(r),
      transaction_outcome: r.transactionOutcome,
      receipts_outcome: r.receiptsOutcome,
      ...(withReceipts ? { receipts: [] } : {}),
    };
  };

  /** Waits (as nearcore does) until the transaction reaches `want`, or times out. */
  const waitFor = async (hash: string, want: string, withReceipts: boolean) => {
    const deadline = Date.now() + opts.waitTimeoutMs;
    for (;;) {
      const r = ledger.transaction(hash);
      if (!r) {
        throw new RpcError(
          "UNKNOWN_TRANSACTION",
          { requested_transaction_hash: hash },
          `Transaction ${hash} doesn't exist`,
        );
      }
      const stage = ledger.stage(hash) ?? "NONE";
      if (rank(stage) >= rank(want) || want === "NONE") return outcomeOf(r, withReceipts);
      if (Date.now() >= deadline)
        throw new RpcError("TIMEOUT_ERROR", {}, "Timeout", "HANDLER_ERROR", 408);
      await Promise.race([ledger.nextBlock(), new Promise((res) => setTimeout(res, 200))]);
    }
  };

  const submit = (base64: unknown) => {
    if (typeof base64 !== "string") {
      throw new RpcError(
        "PARSE_ERROR",
        {},
        "signed_tx_base64 is required",
        "REQUEST_VALIDATION_ERROR",
        400,
      );
    }
    try {
      return ledger.submit(base64);
    } catch (e) {
      if (e instanceof InvalidTransaction) {
        const kind = typeof e.kind === "string" ? { [e.kind]: null } : e.kind;
        throw new RpcError(
          "INVALID_TRANSACTION",
          { TxExecutionError: { InvalidTxError: kind } },
          e.message,
        );
      }
      throw e;
    }
  };

  const query = (p: Params) => {
    const block = pickBlock(ledger, p);
    const at = { block_height: block.height, block_hash: block.hash };
    const accountId = String(p["account_id"] ?? "");
    switch (p["request_type"]) {
      case "view_account": {
        const a = ledger.account(accountId);
        if (!a)
          throw new RpcError(
            "UNKNOWN_ACCOUNT",
            { requested_account_id: accountId, ...at },
            `account ${accountId} does not exist while viewing`,
          );
        return {
          amount: a.amount.toString(),
          locked: "0",
          code_hash: ledger.hasContract(accountId)
            ? "E8jZ1giWcVrps8PcV75ATauu6gFRkcwjNtKp7NKmipZG"
            : "11111111111111111111111111111111",
          storage_usage: 182,
          storage_paid_at: 0,
          ...at,
        };
      }
      case "view_access_key": {
        if (!ledger.account(accountId)) {
          throw new RpcError(
            "UNKNOWN_ACCOUNT",
            { requested_account_id: accountId, ...at },
            `account ${accountId} does not exist while viewing`,
          );
        }
        const publicKey = String(p["public_key"] ?? "");
        const key = ledger.accessKey(accountId, publicKey);
        if (!key) {
          throw new RpcError(
            "UNKNOWN_ACCESS_KEY",
            { public_key: publicKey, ...at },
            `access key ${publicKey} does not exist while viewing`,
          );
        }
        return { nonce: Number(key.nonce), permission: key.permission, ...at };
      }
      case "view_access_key_list": {
        const a = ledger.account(accountId);
        if (!a)
          throw new RpcError(
            "UNKNOWN_ACCOUNT",
            { requested_account_id: accountId, ...at },
            `account ${accountId} does not exist while viewing`,
          );
        return {
          keys: [...a.keys].map(([public_key, k]) => ({
            public_key,
            access_key: { nonce: Number(k.nonce), permission: k.permission },
          })),
          ...at,
        };
      }
      case "view_code": {
        if (!ledger.hasContract(accountId))
          throw new RpcError(
            "NO_CONTRACT_CODE",
            { contract_account_id: accountId, ...at },
            `Contract code for contract ID ${accountId} has never been observed on the node`,
          );
        return {
          code_base64: Buffer.from("devnet nep141").toString("base64"),
          hash: "E8jZ1giWcVrps8PcV75ATauu6gFRkcwjNtKp7NKmipZG",
          ...at,
        };
      }
      case "call_function": {
        if (!ledger.account(accountId))
          throw new RpcError(
            "UNKNOWN_ACCOUNT",
            { requested_account_id: accountId, ...at },
            `account ${accountId} does not exist while viewing`,
          );
        const args = Buffer.from(String(p["args_base64"] ?? ""), "base64");
        let ran;
        try {
          ran = ledger.view(accountId, String(p["method_name"] ?? ""), args);
        } catch (e) {
          const message = e instanceof ContractPanic ? e.message : String(e);
          throw new RpcError(
            "CONTRACT_EXECUTION_ERROR",
            {
              vm_error: `wasm execution failed with error: HostError(GuestPanic { panic_msg: ${JSON.stringify(message)} })`,
              ...at,
            },
            message,
          );
        }
        if ("noCode" in ran)
          throw new RpcError(
            "NO_CONTRACT_CODE",
            { contract_account_id: accountId, ...at },
            `Contract code for contract ID ${accountId} has never been observed on the node`,
          );
        const bytes =
          ran.result.value === undefined ? [] : [...Buffer.from(JSON.stringify(ran.result.value))];
        return { result: bytes, logs: ran.result.logs, ...at };
      }
      default:
        throw new RpcError(
          "PARSE_ERROR",
          {},
          `unknown request_type ${String(p["request_type"])}`,
          "REQUEST_VALIDATION_ERROR",
          400,
        );
    }
  };

  const txParams = (p: Params) => {
    return {
      hash: String(p["tx_hash"] ?? ""),
      want: String(p["wait_until"] ?? "EXECUTED_OPTIMISTIC"),
    };
  };

  return {
    status: () => ({
      chain_id: ledger.chainId,
      genesis_hash: ledger.genesisHash,
      protocol_version: 73,
      version: { version: "2.6.0-devnet", build: "devnet" },
      sync_info: {
        latest_block_hash: ledger.head.hash,
        latest_block_height: ledger.head.height,
        latest_block_time: new Date(Number(ledger.head.timestampNs / 1_000_000n)).toISOString(),
        syncing: false,
      },
    }),
    block: (p: Params) => blockView(pickBlock(ledger, p)),
    gas_price: () => ({ gas_price: "100000000" }),
    query: (p: Params) => query(p),
    send_tx: async (p: Params) => {
      const hash = submit(p["signed_tx_base64"]);
      return waitFor(hash, String(p["wait_until"] ?? "EXECUTED_OPTIMISTIC"), false);
    },
    broadcast_tx_async: (p: Params) => submit(p["signed_tx_base64"]),
    broadcast_tx_commit: async (p: Params) =>
      waitFor(submit(p["signed_tx_base64"]), "EXECUTED_OPTIMISTIC", false),
    tx: async (p: Params) => {
      const { hash, want } = txParams(p);
      return waitFor(hash, want, false);
    },
    EXPERIMENTAL_tx_status: async (p: Params) => {
      const { hash, want } = txParams(p);
      return waitFor(hash, want, true);
    },
  } as Record<string, (p: never) => unknown>;
}

export interface ServedNear {
  rpcUrl: string;
  close(): Promise<void>;
}

export async function serveNear(
  ledger: NearLedger,
  port = 0,
  waitTimeoutMs = 10_000,
): Promise<ServedNear> {
  const handlers = nearHandlers(ledger, { waitTimeoutMs });
  const server: Server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString("utf8")));
    req.on("end", () => {
      void (async () => {
        let id: unknown = null;
        const send = (status: number, payload: unknown) => {
          res.writeHead(status, { "content-type": "application/json" });
          res.end(JSON.stringify({ jsonrpc: "2.0", id, ...(payload as object) }));
        };
        try {
          const msg = JSON.parse(body) as { id?: unknown; method?: string; params?: unknown };
          id = msg.id ?? null;
          const handler = handlers[String(msg.method)];
          if (!handler) {
            return send(200, {
              error: {
                name: "REQUEST_VALIDATION_ERROR",
                cause: { name: "METHOD_NOT_FOUND", info: { method_name: msg.method } },
                code: -32601,
                message: "Method not found",
                data: String(msg.method),
              },
            });
          }
          send(200, {
            result: await handler(namedParams(String(msg.method), msg.params) as never),
          });
        } catch (e) {
          if (e instanceof RpcError) {
            return send(e.httpStatus, {
              error: {
                name: e.kind,
                cause: { name: e.causeName, info: e.info },
                code: -32000,
                message: "Server error",
                data: e.message,
              },
            });
          }
          send(200, {
            error: {
              name: "REQUEST_VALIDATION_ERROR",
              cause: { name: "PARSE_ERROR", info: {} },
              code: -32700,
              message: "Parse error",
              data: String(e),
            },
          });
        }
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const { port: bound } = server.address() as AddressInfo;
  return {
    rpcUrl: `http://127.0.0.1:${bound}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
