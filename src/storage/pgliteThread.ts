/**
 * The embedded database (PGlite) on a thread of its own.
 *
 * PGlite is PostgreSQL compiled to WebAssembly, and it executes every
 * statement synchronously on the thread that calls it. In the service's
 * thread that time is taken from HTTP, hashing and signature checks: under a
 * settle load about a quarter of the thread's busy time was PGlite's. On its
 * own thread the statements run on the machine's other core while the
 * service's thread goes on with other requests.
 *
 * Nothing about durability changes: the same PGlite writes the same data
 * directory, and a statement's promise settles only after the thread has
 * finished it (a COMMIT is answered after it is committed).
 *
 * Results cross threads by structured clone, which keeps what PGlite returns
 * (strings for numeric and int8, Date, Uint8Array, parsed JSON).
 */
import { readFile } from "node:fs/promises";
import { setFlagsFromString } from "node:v8";
import type { Worker } from "node:worker_threads";
import type { PGliteOptions } from "@electric-sql/pglite";
import { siblingWorker } from "../lib/siblingEntry.js";
import type { EmbeddedDatabase, EmbeddedResult } from "./pgliteDialect.js";

export interface WorkerInput {
  dataDir: string;
  conf: string[];
  /** PGlite's compiled WebAssembly, shared so each thread skips compiling it again. */
  modules?: CompiledPGlite | undefined;
}

type WasmModule = NonNullable<PGliteOptions["pgliteWasmModule"]>;
// The ES2023 library this project compiles against leaves WebAssembly out; Node has it.
declare const WebAssembly: { compile(bytes: Uint8Array): Promise<WasmModule> };

interface CompiledPGlite {
  pglite: WasmModule;
  initdb: WasmModule;
}

let compiled: Promise<CompiledPGlite> | undefined;

/**
 * Compiling PGlite's WebAssembly (9 MB) takes seconds, and a new thread
 * cannot reuse what another thread compiled unless it is handed the module.
 * It is compiled once per process and shared with every database thread.
 *
 * It is compiled by V8's baseline WebAssembly compiler (Liftoff) alone. By
 * default V8 also recompiles hot functions with its optimizing compiler, and
 * for PostgreSQL's 9 MB that costs 60–90 MB of resident memory (optimized
 * code beside the baseline code, and the compiler's working memory) and
 * seconds of CPU at start. Baseline code runs statements about 15% slower,
 * which the database's thread has to spare: it runs about one statement per
 * settlement, a few hundred a second at most, and several thousand a second
 * with Liftoff. The flag is set only around this compilation, so any other
 * WebAssembly (the FHE SDK of confidential settlement) keeps the optimizing
 * compiler, unless the operator passed `--liftoff-only` to node themselves.
 */
function compiledPGlite(): Promise<CompiledPGlite> {
  compiled ??= (async () => {
    const dist = new URL("./", import.meta.resolve("@electric-sql/pglite"));
    const bytes = await Promise.all(
      ["pglite.wasm", "initdb.wasm"].map((f) => readFile(new URL(f, dist))),
    );
    const operatorChose = process.execArgv.some((a) => /^--(no-)?liftoff[-_]only$/.test(a));
    if (!operatorChose) setFlagsFromString("--liftoff-only");
    try {
      const [pglite, initdb] = await Promise.all(bytes.map((b) => WebAssembly.compile(b)));
      return { pglite: pglite!, initdb: initdb! };
    } finally {
      if (!operatorChose) setFlagsFromString("--no-liftoff-only");
    }
  })();
  return compiled;
}

export type ToDb =
  { kind: "query"; id: number; sql: string; params: unknown[] } | { kind: "close" };

interface DbErrorFields {
  message: string;
  code: string | undefined;
  detail: string | undefined;
  constraint: string | undefined;
}

export type FromDb =
  | { kind: "ready" }
  | { kind: "failed"; error: DbErrorFields }
  | { kind: "result"; id: number; rows: unknown[]; affectedRows: number | undefined }
  | { kind: "error"; id: number; error: DbErrorFields }
  | { kind: "closed" };

/** A statement the database refused, with PostgreSQL's fields (code, detail, constraint). */
export class EmbeddedDbError extends Error {
  readonly code: string | undefined;
  readonly detail: string | undefined;
  readonly constraint: string | undefined;
  constructor(fields: DbErrorFields) {
    super(fields.message);
    this.name = "EmbeddedDbError";
    this.code = fields.code;
    this.detail = fields.detail;
    this.constraint = fields.constraint;
  }
}

// The thread's JavaScript only moves rows between PGlite and messages: short-
// lived garbage that a small young generation collects as well, with less
// memory held (PGlite's own memory is WebAssembly, outside these limits).
const THREAD_LIMITS = { maxYoungGenerationSizeMb: 8 };

function startWorker(input: WorkerInput): Worker {
  return siblingWorker(import.meta.url, "pgliteWorker", {
    workerData: input,
    resourceLimits: THREAD_LIMITS,
  });
}

interface Pending {
  resolve: (result: EmbeddedResult<unknown>) => void;
  reject: (error: Error) => void;
}

export class PGliteThread implements EmbeddedDatabase {
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private stopped: Error | undefined;
  private closing: Promise<void> | undefined;
  private onClosed: (() => void) | undefined;
  private ready = false;

  private constructor(private readonly worker: Worker) {}

  /** Starts the thread and opens the database; resolves once it answers statements. */
  static async open(input: WorkerInput): Promise<PGliteThread> {
    const worker = startWorker({ ...input, modules: await compiledPGlite() });
    const thread = new PGliteThread(worker);
    return new Promise<PGliteThread>((resolve, reject) => {
      worker.on("message", (message: FromDb) => {
        if (message.kind === "ready") {
          thread.ready = true;
          thread.idle();
          resolve(thread);
        } else if (message.kind === "failed") {
          reject(new EmbeddedDbError(message.error));
        } else thread.receive(message);
      });
      worker.on("error", (e) => thread.stop(e, reject));
      worker.on("exit", (code) =>
        thread.stop(new Error(`the embedded database's thread exited (code ${code})`), reject),
      );
    });
  }

  get closed(): boolean {
    return this.stopped !== undefined;
  }

  query<R>(sql: string, params: readonly unknown[]): Promise<EmbeddedResult<R>> {
    if (this.stopped) return Promise.reject(this.stopped);
    const id = this.nextId++;
    // While a statement is out the thread keeps the process alive; idle, it
    // does not, so a finished CLI or test exits without closing first.
    if (this.pending.size === 0) this.worker.ref();
    this.worker.postMessage({ kind: "query", id, sql, params: [...params] } satisfies ToDb);
    return new Promise<EmbeddedResult<R>>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as Pending["resolve"], reject });
    });
  }

  /** Closes the database (after the statements already sent) and ends the thread. */
  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      if (this.stopped) return resolve();
      this.onClosed = resolve;
      this.worker.ref();
      this.worker.postMessage({ kind: "close" } satisfies ToDb);
    });
    return this.closing;
  }

  private receive(message: FromDb): void {
    if (message.kind === "closed") {
      this.stopped = new Error("the embedded database is closed");
      this.onClosed?.();
      void this.worker.terminate();
      return;
    }
    if (message.kind !== "result" && message.kind !== "error") return;
    const waiting = this.pending.get(message.id);
    if (!waiting) return;
    this.pending.delete(message.id);
    if (this.pending.size === 0) this.idle();
    if (message.kind === "error") waiting.reject(new EmbeddedDbError(message.error));
    else waiting.resolve({ rows: message.rows, affectedRows: message.affectedRows });
  }

  private idle(): void {
    if (!this.closing) this.worker.unref();
  }

  /**
   * The thread ended. After a close that is expected; otherwise (PGlite
   * aborted, out of memory) the database is gone for this process, so every
   * statement waiting or to come is refused, and the process is ended so a
   * supervisor restarts it: the data directory and the settle journal are
   * intact, and the reconciler finishes what was in flight.
   */
  private stop(cause: Error, rejectOpen: (e: Error) => void): void {
    if (this.stopped) return;
    const error = new Error(`the embedded database stopped: ${cause.message}`, { cause });
    this.stopped = error;
    rejectOpen(error);
    for (const waiting of this.pending.values()) waiting.reject(error);
    this.pending.clear();
    this.onClosed?.();
    if (this.ready && !this.closing) {
      process.nextTick(() => {
        throw error;
      });
    }
  }
}
