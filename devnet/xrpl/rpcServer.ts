/**
 * rippled's public API for the local XRP Ledger, on loopback: the same
 * methods over WebSocket (what the `xrpl` package's `Client` speaks:
 * `{id, command, …}` in, `{id, type: "response", status, result}` out) and
 * over HTTP JSON-RPC (`{method, params: [{…}]}` in, `{result}` out), in
 * API version 2 shapes.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { WebSocketServer, type WebSocket } from "ws";
import { describeResult } from "./engineResults.js";
import type { ClosedLedger, XrplLedger } from "./ledger.js";

type Params = Record<string, unknown>;

class RpcFailure extends Error {
  constructor(
    readonly error: string,
    readonly code: number,
    message: string,
    /** Fields rippled adds to this error (`searched_all` on `txnNotFound`). */
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

const notFound = () => new RpcFailure("actNotFound", 19, "Account not found.");

const isoTime = (rippleSeconds: number) =>
  new Date((rippleSeconds + 946_684_800) * 1000).toISOString();

function ledgerHeader(l: ClosedLedger, closed: boolean) {
  return {
    ledger_index: l.index,
    ledger_hash: l.hash,
    parent_hash: l.parentHash,
    close_time: l.closeTime,
    close_time_iso: isoTime(l.closeTime),
    closed,
    transaction_hash: "0".repeat(64),
  };
}

/** Which ledger a request reads: "validated" (default for most), "current" or an index. */
function pickLedger(ledger: XrplLedger, p: Params) {
  const which = p["ledger_index"] ?? "validated";
  if (which === "current") return { current: true as const };
  if (which === "validated" || which === "closed")
    return { current: false as const, ledger: ledger.validatedLedger };
  const at = ledger.ledgerAt(Number(which));
  if (!at) throw new RpcFailure("lgrNotFound", 21, "ledgerNotFound");
  return { current: false as const, ledger: at };
}

function xrplHandlers(ledger: XrplLedger): Record<string, (p: Params) => unknown> {
  const where = (p: Params) => {
    const pick = pickLedger(ledger, p);
    return pick.current
      ? { ledger_current_index: ledger.openIndex, validated: false }
      : { ledger_index: pick.ledger.index, ledger_hash: pick.ledger.hash, validated: true };
  };
  const account = (p: Params) => {
    const a = ledger.account(String(p["account"] ?? ""));
    if (!a) throw notFound();
    return a;
  };
  return {
    ping: () => ({}),
    server_info: () => ({
      info: {
        build_version: "2.4.0-devnet",
        complete_ledgers: `${ledger.validatedIndex - 100 > 0 ? ledger.validatedIndex - 100 : 1}-${ledger.validatedIndex}`,
        network_id: ledger.networkId,
        server_state: "full",
        load_factor: 1,
        validated_ledger: {
          seq: ledger.validatedIndex,
          hash: ledger.validatedLedger.hash,
          age: 0,
          base_fee_xrp: Number(ledger.baseFee) / 1e6,
          reserve_base_xrp: Number(ledger.reserveBase) / 1e6,
          reserve_inc_xrp: Number(ledger.reserveIncrement) / 1e6,
        },
      },
    }),
    server_state: () => ({
      state: {
        build_version: "2.4.0-devnet",
        network_id: ledger.networkId,
        server_state: "full",
        load_base: 256,
        load_factor: 256,
        validated_ledger: {
          seq: ledger.validatedIndex,
          hash: ledger.validatedLedger.hash,
          base_fee: Number(ledger.baseFee),
          reserve_base: Number(ledger.reserveBase),
          reserve_inc: Number(ledger.reserveIncrement),
        },
      },
    }),
    ledger: (p) => {
      const pick = pickLedger(ledger, p);
      if (pick.current) {
        return {
          ledger: {
            ledger_index: ledger.openIndex,
            closed: false,
            parent_hash: ledger.validatedLedger.hash,
          },
          ledger_current_index: ledger.openIndex,
          validated: false,
        };
      }
      return {
        ledger: {
          ...ledgerHeader(pick.ledger, true),
          ...(p["transactions"]
            ? {
                transactions: p["expand"]
                  ? expandedTransactions(ledger, pick.ledger, p["api_version"] === 1)
                  : pick.ledger.transactions,
              }
            : {}),
        },
        ledger_hash: pick.ledger.hash,
        ledger_index: pick.ledger.index,
        validated: true,
      };
    },
    ledger_current: () => ({ ledger_current_index: ledger.openIndex }),
    ledger_closed: () => ({
      ledger_hash: ledger.validatedLedger.hash,
      ledger_index: ledger.validatedIndex,
    }),
    fee: () => ({
      current_ledger_size: "0",
      current_queue_size: "0",
      drops: {
        base_fee: ledger.baseFee.toString(),
        median_fee: "5000",
        minimum_fee: ledger.baseFee.toString(),
        open_ledger_fee: ledger.baseFee.toString(),
      },
      expected_ledger_size: "1000",
      ledger_current_index: ledger.openIndex,
      levels: {
        median_level: "128000",
        minimum_level: "256",
        open_ledger_level: "256",
        reference_level: "256",
      },
      max_queue_size: "20000",
    }),
    account_info: (p) => {
      const a = account(p);
      return {
        account_data: {
          Account: a.Account,
          Balance: a.Balance.toString(),
          Flags: a.Flags,
          LedgerEntryType: "AccountRoot",
          OwnerCount: a.OwnerCount,
          PreviousTxnID: a.PreviousTxnID,
          PreviousTxnLgrSeq: a.PreviousTxnLgrSeq,
          Sequence: a.Sequence,
          ...(a.RegularKey ? { RegularKey: a.RegularKey } : {}),
          index: "",
        },
        account_flags: { disableMasterKey: (a.Flags & 0x00100000) !== 0 },
        ...where(p),
      };
    },
    account_lines: (p) => {
      const a = account(p);
      return {
        account: a.Account,
        lines: ledger.linesOf(a.Account).map((l) => {
          const low = l.low === a.Account;
          return {
            account: low ? l.high : l.low,
            balance: (low ? l.balance : l.balance.negated()).toString(),
            currency: l.currency,
            limit: (low ? l.lowLimit : l.highLimit).toString(),
            limit_peer: (low ? l.highLimit : l.lowLimit).toString(),
            quality_in: 0,
            quality_out: 0,
          };
        }),
        ...where(p),
      };
    },
    account_objects: (p) => {
      const a = account(p);
      const type = p["type"];
      const states =
        type === undefined || type === "state"
          ? ledger.linesOf(a.Account).map((l) => ({
              LedgerEntryType: "RippleState",
              Balance: {
                currency: l.currency,
                issuer: "rrrrrrrrrrrrrrrrrrrrBZbvji",
                value: l.balance.toString(),
              },
              Flags: 0,
              HighLimit: { currency: l.currency, issuer: l.high, value: l.highLimit.toString() },
              LowLimit: { currency: l.currency, issuer: l.low, value: l.lowLimit.toString() },
              PreviousTxnID: l.PreviousTxnID,
              PreviousTxnLgrSeq: l.PreviousTxnLgrSeq,
            }))
          : [];
      // Tickets are not modelled: an account never has any.
      return { account: a.Account, account_objects: states, ...where(p) };
    },
    simulate: (p) => {
      let tx = p["tx_json"] as Record<string, unknown> | undefined;
      if (!tx && typeof p["tx_blob"] === "string") {
        throw new RpcFailure("invalidParams", 31, "this ledger simulates tx_json only");
      }
      if (!tx || typeof tx !== "object")
        throw new RpcFailure("invalidParams", 31, "Missing field 'tx_json'.");
      if (typeof tx["TxnSignature"] === "string" && tx["TxnSignature"] !== "") {
        throw new RpcFailure("transactionSigned", 31, "Transaction should not be signed.");
      }
      tx = { ...tx };
      const { result, meta } = ledger.simulate(tx);
      return {
        ...describeResult(result),
        applied: false,
        ledger_index: ledger.openIndex,
        tx_json: tx,
        ...(meta ? { meta } : {}),
      };
    },
    submit: (p) => {
      const blob = p["tx_blob"];
      if (typeof blob !== "string")
        throw new RpcFailure("invalidParams", 31, "Missing field 'tx_blob'.");
      const r = ledger.submit(blob, { failHard: p["fail_hard"] === true });
      return {
        ...describeResult(r.result),
        accepted: r.applied || r.queued === true,
        applied: r.applied,
        broadcast: r.applied,
        kept: r.applied || r.queued === true,
        queued: r.queued === true,
        tx_blob: blob,
        tx_json: { ...(r.tx ?? {}), ...(r.hash ? { hash: r.hash } : {}) },
        validated_ledger_index: ledger.validatedIndex,
        account_sequence_next: r.tx ? (ledger.account(String(r.tx["Account"]))?.Sequence ?? 0) : 0,
      };
    },
    tx: (p) => {
      const hash = String(p["transaction"] ?? "");
      const t = ledger.transaction(hash);
      if (!t) {
        // With a range, rippled says whether it holds every ledger of it.
        const min = p["min_ledger"];
        const max = p["max_ledger"];
        const ranged = typeof min === "number" && typeof max === "number";
        throw new RpcFailure("txnNotFound", 29, "Transaction not found.", {
          ...(ranged ? { searched_all: ledger.holdsLedgers(min, max) } : {}),
        });
      }
      const validated = t.ledgerIndex !== undefined;
      const closed = validated ? ledger.ledgerAt(t.ledgerIndex!) : undefined;
      return {
        tx_json: t.tx,
        hash: t.hash,
        validated,
        ...(validated
          ? {
              meta: t.meta,
              ledger_index: t.ledgerIndex,
              ...(closed
                ? { ledger_hash: closed.hash, close_time_iso: isoTime(closed.closeTime) }
                : {}),
            }
          : {}),
      };
    },
  };
}

/**
 * A ledger's transactions with their metadata, as rippled expands them: API
 * v2 nests each as `tx_json` beside `hash` and `meta`; v1 flattens it and
 * names the metadata `metaData`.
 */
function expandedTransactions(ledger: XrplLedger, closed: ClosedLedger, v1: boolean): unknown[] {
  return closed.transactions.map((hash) => {
    const t = ledger.transaction(hash)!;
    return v1
      ? { ...t.tx, hash: t.hash, metaData: t.meta }
      : {
          hash: t.hash,
          tx_json: t.tx,
          meta: t.meta,
          validated: true,
          ledger_index: closed.index,
          close_time_iso: isoTime(closed.closeTime),
        };
  });
}

/** Runs one request; failures come back in rippled's error shape. */
function answer(
  handlers: Record<string, (p: Params) => unknown>,
  method: string,
  params: Params,
): { ok: true; result: Record<string, unknown> } | { ok: false; error: Record<string, unknown> } {
  const handler = handlers[method];
  try {
    if (!handler) throw new RpcFailure("unknownCmd", 32, "Unknown method.");
    return { ok: true, result: handler(params) as Record<string, unknown> };
  } catch (e) {
    const f =
      e instanceof RpcFailure
        ? e
        : new RpcFailure("internal", 73, e instanceof Error ? e.message : String(e));
    return {
      ok: false,
      error: {
        error: f.error,
        error_code: f.code,
        error_message: f.message,
        ...f.extra,
        request: { command: method, ...params },
      },
    };
  }
}

export interface ServedXrpl {
  rpcUrl: string;
  wsUrl: string;
  /**
   * Test control: WebSocket down (every connection dropped, new ones
   * refused) or back up. JSON-RPC over HTTP is not affected.
   */
  setWebSocketDown(down: boolean): void;
  /** Connections subscribed to the `ledger` stream now. */
  ledgerSubscribers(): number;
  /** JSON-RPC calls over HTTP answered so far, by method (a test counts what a client asked). */
  callsServed(method: string): number;
  close(): Promise<void>;
}

/** What rippled's `ledger` stream says of a validated ledger (and `subscribe` answers with). */
function ledgerStreamFields(ledger: XrplLedger, l: ClosedLedger) {
  return {
    fee_base: Number(ledger.baseFee),
    ledger_hash: l.hash,
    ledger_index: l.index,
    ledger_time: l.closeTime,
    reserve_base: Number(ledger.reserveBase),
    reserve_inc: Number(ledger.reserveIncrement),
    validated_ledgers: `${ledger.ledgerAt(l.index - 100) ? l.index - 100 : 1}-${l.index}`,
  };
}

export async function serveXrpl(ledger: XrplLedger, port = 0): Promise<ServedXrpl> {
  const handlers = xrplHandlers(ledger);
  const served = new Map<string, number>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      let method = "";
      let params: Params = {};
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
          method?: string;
          params?: unknown;
        };
        method = String(body.method ?? "");
        // rippled's JSON-RPC takes its parameters as one object inside an
        // array (or none at all); anything else it cannot read, and says so
        // rather than running the command without them.
        const given = body.params;
        if (given !== undefined && given !== null) {
          const only =
            Array.isArray(given) && given.length === 1 ? (given[0] as unknown) : undefined;
          if (typeof only !== "object" || only === null || Array.isArray(only)) {
            throw new Error("params unparseable");
          }
          params = only as Params;
        }
      } catch {
        res.writeHead(400, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            result: {
              error: "invalidParams",
              error_message: "params unparseable: give one object inside an array",
              status: "error",
            },
          }),
        );
        return;
      }
      served.set(method, (served.get(method) ?? 0) + 1);
      const a = answer(handlers, method, params);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          result: a.ok ? { ...a.result, status: "success" } : { ...a.error, status: "error" },
        }),
      );
    });
  });
  let webSocketDown = false;
  const wss = new WebSocketServer({ server, verifyClient: () => !webSocketDown });
  /** Sockets subscribed to the `ledger` stream. */
  const ledgerSubscribers = new Set<WebSocket>();
  const stopListening = ledger.onClose((closed) => {
    if (ledgerSubscribers.size === 0) return;
    const message = JSON.stringify({
      type: "ledgerClosed",
      ...ledgerStreamFields(ledger, closed),
      txn_count: closed.transactions.length,
    });
    for (const socket of ledgerSubscribers) socket.send(message);
  });
  wss.on("connection", (socket) => {
    socket.on("close", () => ledgerSubscribers.delete(socket));
    socket.on("message", (data) => {
      let request: Params;
      try {
        request = JSON.parse(String(data)) as Params;
      } catch {
        socket.send(JSON.stringify({ type: "response", status: "error", error: "badSyntax" }));
        return;
      }
      const { id, command, ...params } = request;
      // Streams live on the connection, so only the WebSocket serves them.
      const streams = Array.isArray(params["streams"]) ? (params["streams"] as unknown[]) : [];
      if ((command === "subscribe" || command === "unsubscribe") && streams.includes("ledger")) {
        if (command === "unsubscribe") ledgerSubscribers.delete(socket);
        else ledgerSubscribers.add(socket);
        const result =
          command === "subscribe" ? ledgerStreamFields(ledger, ledger.validatedLedger) : {};
        socket.send(
          JSON.stringify({ id, type: "response", status: "success", api_version: 2, result }),
        );
        return;
      }
      const a = answer(handlers, String(command ?? ""), params);
      socket.send(
        JSON.stringify(
          a.ok
            ? { id, type: "response", status: "success", api_version: 2, result: a.result }
            : { id, type: "response", status: "error", api_version: 2, ...a.error },
        ),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const { port: bound } = server.address() as AddressInfo;
  return {
    rpcUrl: `http://127.0.0.1:${bound}`,
    wsUrl: `ws://127.0.0.1:${bound}`,
    ledgerSubscribers: () => ledgerSubscribers.size,
    callsServed: (method) => served.get(method) ?? 0,
    setWebSocketDown(down) {
      webSocketDown = down;
      if (!down) return;
      ledgerSubscribers.clear();
      for (const c of wss.clients) c.terminate();
    },
    async close() {
      stopListening();
      for (const c of wss.clients) c.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
