/**
 * The results of the transactions in one validated ledger, read once for
 * every settle that waits on it.
 *
 * When a ledger closes, every settle waiting for its payment wakes at once
 * (the `ledger` stream announces it). Looked up one by one, a hundred
 * waiting payments are a hundred `tx` calls, each parsed and answered on the
 * service's thread while the answers they carry wait behind the others.
 * When several ask about the same ledger in one turn of the event loop, the
 * ledger is read once instead (`ledger` with its transactions expanded) and
 * each is answered from it. A lone waiter still asks `tx`: a busy mainnet
 * ledger is far larger than one transaction.
 *
 * Nothing here decides a payment on its own: a ledger that cannot be read,
 * or an answer of an unexpected shape, sends every asker back to `tx`.
 */
import type { XrplRpc } from "./rpc.js";

/** From this many lookups of one ledger in one turn, the ledger is read whole. */
const READ_WHOLE_FROM = 4;
/** Ledgers whose results are kept for a settle that looks a little late. */
const KEEP_LEDGERS = 4;

/**
 * A transaction's result in the ledger (`tesSUCCESS`, `tec…`); `null`: not
 * in that ledger; `undefined`: not known here (ask `tx`).
 */
export type LedgerOutcome = string | null | undefined;

interface Asked {
  hash: string;
  resolve: (outcome: LedgerOutcome) => void;
}

export class LedgerOutcomes {
  /** Lookups made this turn, by ledger index. */
  private asked = new Map<number, Asked[]>();
  /** Ledgers read whole (or being read), newest last. */
  private readonly read = new Map<number, Promise<Map<string, string> | undefined>>();

  constructor(private readonly rpc: XrplRpc) {}

  /** What validated ledger `index` says of the transaction `hash`. */
  outcome(index: number, hash: string): Promise<LedgerOutcome> {
    return new Promise((resolve) => {
      if (this.asked.size === 0) setImmediate(() => this.answer());
      const list = this.asked.get(index) ?? [];
      list.push({ hash: hash.toUpperCase(), resolve });
      this.asked.set(index, list);
    });
  }

  private answer(): void {
    const asked = this.asked;
    this.asked = new Map();
    for (const [index, list] of asked) {
      const results =
        this.read.get(index) ??
        (list.length >= READ_WHOLE_FROM ? this.readWhole(index) : undefined);
      if (!results) {
        for (const a of list) a.resolve(undefined);
        continue;
      }
      void results.then((byHash) => {
        for (const a of list) a.resolve(byHash ? (byHash.get(a.hash) ?? null) : undefined);
      });
    }
  }

  private readWhole(index: number): Promise<Map<string, string> | undefined> {
    const reading = this.fetch(index);
    this.read.set(index, reading);
    for (const old of this.read.keys()) {
      if (this.read.size <= KEEP_LEDGERS) break;
      this.read.delete(old);
    }
    // A failed read is not kept: a later asker goes to `tx` or tries again.
    void reading.then((r) => {
      if (!r && this.read.get(index) === reading) this.read.delete(index);
    });
    return reading;
  }

  private async fetch(index: number): Promise<Map<string, string> | undefined> {
    try {
      const r = await this.rpc.call<{
        validated?: boolean;
        ledger?: { transactions?: unknown[] };
      }>("ledger", { ledger_index: index, transactions: true, expand: true });
      const entries = r.ledger?.transactions;
      if (r.validated !== true || !Array.isArray(entries)) return undefined;
      const byHash = new Map<string, string>();
      for (const entry of entries) {
        const found = resultOf(entry);
        // Hashes only, or a shape this does not know: every asker goes to `tx`.
        if (!found) return undefined;
        byHash.set(found.hash, found.result);
      }
      return byHash;
    } catch {
      return undefined;
    }
  }
}

/**
 * One expanded transaction of a ledger: API v2 nests it as `tx_json` beside
 * `hash` and `meta`; API v1 flattens it and names the metadata `metaData`.
 */
function resultOf(entry: unknown): { hash: string; result: string } | undefined {
  if (typeof entry !== "object" || entry === null) return undefined;
  const e = entry as {
    hash?: unknown;
    tx_json?: { hash?: unknown };
    meta?: unknown;
    metaData?: unknown;
  };
  const hash = typeof e.hash === "string" ? e.hash : e.tx_json?.hash;
  const meta = (e.meta ?? e.metaData) as { TransactionResult?: unknown } | undefined;
  const result = typeof meta === "object" && meta !== null ? meta.TransactionResult : undefined;
  if (typeof hash !== "string" || typeof result !== "string") return undefined;
  return { hash: hash.toUpperCase(), result };
}
