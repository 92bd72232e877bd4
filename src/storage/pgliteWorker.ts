/**
 * The embedded database's own thread (see pgliteThread.ts for why).
 *
 * It opens PGlite in the data directory it is given and runs the statements
 * it receives one at a time, in the order they arrive: PGlite is a single
 * session, and the caller's FIFO lock already decides that order (a
 * transaction's statements arrive together, nobody else's in between).
 */
import { parentPort, workerData } from "node:worker_threads";
import { PGlite } from "@electric-sql/pglite";
import type { FromDb, ToDb, WorkerInput } from "./pgliteThread.js";

const port = parentPort;
if (!port) throw new Error("pgliteWorker.ts runs only as a worker thread");

const input = workerData as WorkerInput;
const send = (message: FromDb) => port.postMessage(message);

/** What is safe to hand back across threads (a thrown value may hold anything). */
function describe(e: unknown): Extract<FromDb, { kind: "error" }>["error"] {
  const err = e as { message?: unknown; code?: unknown; detail?: unknown; constraint?: unknown };
  const text = (v: unknown) => (typeof v === "string" ? v : undefined);
  return {
    message: text(err?.message) ?? String(e),
    code: text(err?.code),
    detail: text(err?.detail),
    constraint: text(err?.constraint),
  };
}

let client: PGlite;
try {
  client = await PGlite.create(input.dataDir, {
    postgresqlconf: input.conf,
    ...(input.modules
      ? { pgliteWasmModule: input.modules.pglite, initdbWasmModule: input.modules.initdb }
      : {}),
  });
  send({ kind: "ready" });
} catch (e) {
  send({ kind: "failed", error: describe(e) });
  process.exit(1);
}

let chain: Promise<void> = Promise.resolve();
port.on("message", (message: ToDb) => {
  chain = chain.then(async () => {
    if (message.kind === "close") {
      await client.close();
      send({ kind: "closed" });
      port.close();
      return;
    }
    try {
      const res = await client.query(message.sql, message.params);
      send({ kind: "result", id: message.id, rows: res.rows, affectedRows: res.affectedRows });
    } catch (e) {
      send({ kind: "error", id: message.id, error: describe(e) });
    }
  });
});
