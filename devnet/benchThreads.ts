/**
 * A bench ledger's or payers' thread, as the settle benchmark drives it
 * (devnet/<family>/bench.ts): started, then asked questions by id. Off the
 * load generator's thread, their work cannot delay the answers it times.
 * Loaded only by the benchmarks.
 */
import type { Worker } from "node:worker_threads";

/** Resolves with the worker's first message (its readiness), or rejects if it fails first. */
export function firstMessage<M>(worker: Worker): Promise<M> {
  return new Promise<M>((resolve, reject) => {
    worker.once("error", reject);
    worker.once("message", (m: M) => {
      worker.off("error", reject);
      resolve(m);
    });
  });
}

/** Requests answered by id over a worker's messages; every one refused if the worker fails. */
export function answersById<T>(worker: Worker) {
  const waiting = new Map<number, { resolve: (v: T) => void; reject: (e: Error) => void }>();
  let nextId = 1;
  worker.on("error", (e) => {
    for (const w of waiting.values()) w.reject(e);
    waiting.clear();
  });
  return {
    /** Sends the request with `send(id)` and waits for its answer. */
    ask(send: (id: number) => void): Promise<T> {
      const id = nextId++;
      return new Promise<T>((resolve, reject) => {
        waiting.set(id, { resolve, reject });
        send(id);
      });
    },
    /** Answers request `id`. */
    settle(id: number, outcome: { value: T } | { error: Error }) {
      const w = waiting.get(id);
      if (!w) return;
      waiting.delete(id);
      if ("error" in outcome) w.reject(outcome.error);
      else w.resolve(outcome.value);
    },
  };
}
