/**
 * The XRPL bench's local ledger, on a thread of its own (see bench.ts): the
 * same ledger and RPC server the devnet runs, started here, announcing each
 * close (its index, when, and what it validated) to the bench and answering
 * its balance reads. Loaded only by the benchmarks.
 */
import { parentPort, workerData } from "node:worker_threads";
import { startXrplLedger } from "./index.js";

export interface LedgerInput {
  payers: number;
  closeMs: number;
}

export type ToLedger =
  | { kind: "balance"; id: number; account: string; issuer: string; currency: string }
  | { kind: "stop" };

export type FromLedger =
  | { kind: "ready"; info: Awaited<ReturnType<typeof startXrplLedger>>["info"] }
  | { kind: "closed"; index: number; atEpochMs: number; transactions: string[] }
  | { kind: "balance"; id: number; value: string }
  | { kind: "stopped" };

const port = parentPort;
if (!port) throw new Error("benchLedger.ts runs only as a worker thread");
const input = workerData as LedgerInput;
const send = (message: FromLedger) => port.postMessage(message);

const running = await startXrplLedger({ closeMs: input.closeMs, payers: input.payers });
// Taken at the close on this thread's clock, as an instant every thread reads alike.
running.ledger.onClose((l) =>
  send({
    kind: "closed",
    index: l.index,
    atEpochMs: performance.timeOrigin + performance.now(),
    transactions: [...l.transactions],
  }),
);
port.on("message", (message: ToLedger) => {
  if (message.kind === "balance") {
    const { id, account, issuer, currency } = message;
    send({ kind: "balance", id, value: running.ledger.issuedBalance(account, issuer, currency) });
    return;
  }
  void running.stop().finally(() => {
    send({ kind: "stopped" });
    port.close();
  });
});
send({ kind: "ready", info: running.info });
