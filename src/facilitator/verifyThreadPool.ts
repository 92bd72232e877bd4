/**
 * Verify threads: verifications answered on other cores.
 *
 * Verification is CPU work on the service's thread (typed-data encoding,
 * hashing, signature recovery, the RPC client), and one thread is one core.
 * Each verify thread (verifyThread.ts) builds its own copy of the families
 * whose verifications earn threads (their table entry says so: the EVM
 * family's signature checks) and an engine, from the service's setup, and
 * answers `PaymentFacilitator.verify` for their networks; the service's
 * thread keeps HTTP, keys, quotas, the catalog and every settle.
 *
 * Nothing depends on a thread being there. Until one is ready, after it
 * failed to build, or while it is being replaced after a crash, the service
 * verifies on its own thread as before, and a verification a dying thread
 * held is verified again there (it only reads, so repeating it is safe).
 */
import type { Worker } from "node:worker_threads";
import type { VerifyResponse } from "@x402/core/types";
import type { Logger } from "../lib/logger.js";
import { siblingWorker } from "../lib/siblingEntry.js";
import { ChainUnavailableError, type NetworkDescription } from "../chains/ports.js";
import type { ChainSetups, FamilySettings } from "../chains/index.js";
import type { PaymentRequest } from "../protocol/index.js";
import type { FacilitatorSettings } from "./settings.js";

export interface VerifyThreadInput {
  logLevel: string;
  /** The setups of the families the threads verify for (and only those). */
  chains: ChainSetups;
  settings: FamilySettings;
  facilitator: FacilitatorSettings;
  settleTimeoutMs: number;
  pollingIntervalMs?: number | undefined;
  /** The networks' settled assets, checked on the thread as on the service's. */
  networks: readonly NetworkDescription[];
}

export interface ToVerifyThread {
  id: number;
  request: PaymentRequest;
}

export type FromVerifyThread =
  | { kind: "ready" }
  | { kind: "failed"; message: string }
  | { kind: "answer"; id: number; value: VerifyResponse }
  | {
      kind: "error";
      id: number;
      error:
        | { chainUnavailable: true; network: string; message: string }
        | {
            chainUnavailable: false;
            message: string;
          };
    };

/** The thread ended with this verification unanswered; verify it elsewhere. */
export class VerifyThreadGoneError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "VerifyThreadGoneError";
  }
}

interface Waiting {
  resolve: (value: VerifyResponse) => void;
  reject: (error: Error) => void;
}

/** A crashing thread is replaced, but not forever: past this many, verification stays here. */
const MAX_RESTARTS = 5;
const RESTART_DELAY_MS = 1_000;

export interface VerifyThreadPoolOptions {
  /** Threads to run while verification is busy. */
  count: number;
  /**
   * Start them once verifications reach this many in one second; 0 starts
   * them at once. A quiet service keeps the memory a thread holds (its own
   * copy of the families' libraries and caches, tens of MB).
   */
  startAtPerSecond: number;
  /** Stop them after this long without a verification for them. */
  idleStopMs: number;
  /** Told how many threads are ready whenever that changes (a gauge). */
  onReady?: (ready: number) => void;
  /** Told of each verification a thread answered (a counter). */
  onAnswered?: () => void;
}

class VerifyThread {
  readonly waiting = new Map<number, Waiting>();
  ready = false;
  /** Stopped on purpose (idle, or the pool closing): not a crash. */
  retired = false;
  private ended = false;

  constructor(
    readonly worker: Worker,
    private readonly onChange: (thread: VerifyThread, why?: string, crashed?: boolean) => void,
  ) {
    worker.on("message", (message: FromVerifyThread) => this.receive(message));
    worker.on("error", (e) => this.end(`it failed: ${e.message}`, true));
    worker.on("exit", (code) => this.end(`it exited (code ${code})`, !this.retired));
    // Idle threads do not keep a finished process alive.
    worker.unref();
  }

  send(id: number, request: PaymentRequest): Promise<VerifyResponse> {
    if (this.waiting.size === 0) this.worker.ref();
    return new Promise<VerifyResponse>((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.worker.postMessage({ id, request } satisfies ToVerifyThread);
    });
  }

  retire(): Promise<number> {
    this.retired = true;
    return this.worker.terminate();
  }

  private receive(message: FromVerifyThread): void {
    if (message.kind === "ready") {
      this.ready = true;
      this.onChange(this);
      return;
    }
    if (message.kind === "failed") {
      this.end(`it could not start: ${message.message}`, false);
      void this.retire();
      return;
    }
    const waiting = this.waiting.get(message.id);
    if (!waiting) return;
    this.waiting.delete(message.id);
    if (this.waiting.size === 0) this.worker.unref();
    if (message.kind === "answer") waiting.resolve(message.value);
    else if (message.error.chainUnavailable) {
      waiting.reject(new ChainUnavailableError(message.error.network, message.error.message));
    } else waiting.reject(new Error(message.error.message));
  }

  private end(why: string, crashed: boolean): void {
    if (this.ended) return;
    this.ended = true;
    this.ready = false;
    const gone = new VerifyThreadGoneError(`a verify thread stopped: ${why}`);
    for (const w of this.waiting.values()) w.reject(gone);
    this.waiting.clear();
    this.onChange(this, why, crashed);
  }
}

export class VerifyThreadPool {
  private readonly threads = new Set<VerifyThread>();
  private readonly networks: ReadonlySet<string>;
  private nextId = 1;
  private restarts = 0;
  /** Replacements waiting out their delay (demand must not start more). */
  private replacing = 0;
  /** A thread could not be built (it would fail again) or crashed too often. */
  private gaveUp = false;
  private closed = false;
  private windowStartedAt = 0;
  private windowCount = 0;
  private lastDemandAt = 0;
  private idleTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly input: VerifyThreadInput,
    private readonly opts: VerifyThreadPoolOptions,
    private readonly log: Logger,
  ) {
    this.networks = new Set(
      Object.values(input.chains).flatMap((setup) =>
        (setup as { networks: readonly { id: string }[] }).networks.map((n) => n.id),
      ),
    );
    if (opts.startAtPerSecond === 0) this.startThreads();
  }

  /** Verifications sent to a thread and not yet answered. */
  get inFlight(): number {
    let n = 0;
    for (const t of this.threads) n += t.waiting.size;
    return n;
  }

  /** The running threads (to inspect them, or to end one and see the pool recover). */
  get workers(): Worker[] {
    return [...this.threads].map((t) => t.worker);
  }

  /** Threads ready to verify now. */
  get readyCount(): number {
    let n = 0;
    for (const t of this.threads) if (t.ready) n++;
    return n;
  }

  /**
   * Verifies on the least busy ready thread, or answers undefined when the
   * network is not one the threads serve or no thread is ready (the caller
   * then verifies on its own thread). Rejects with `ChainUnavailableError`
   * as the service's own verify does, and with `VerifyThreadGoneError` if
   * the thread ended first.
   */
  verify(request: PaymentRequest): Promise<VerifyResponse> | undefined {
    if (!this.networks.has(request.paymentRequirements.network)) return undefined;
    this.noteDemand();
    let best: VerifyThread | undefined;
    for (const t of this.threads) {
      if (t.ready && (!best || t.waiting.size < best.waiting.size)) best = t;
    }
    if (!best) return undefined;
    const answer = best.send(this.nextId++, request);
    if (this.opts.onAnswered) void answer.then(this.opts.onAnswered, () => {});
    return answer;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.idleTimer);
    await Promise.all([...this.threads].map((t) => t.retire()));
    this.threads.clear();
  }

  private noteDemand(): void {
    const now = Date.now();
    this.lastDemandAt = now;
    if (this.threads.size > 0 || this.replacing > 0 || this.closed || this.gaveUp) return;
    if (now - this.windowStartedAt >= 1_000) {
      this.windowStartedAt = now;
      this.windowCount = 0;
    }
    if (++this.windowCount >= this.opts.startAtPerSecond) this.startThreads();
  }

  private startThreads(): void {
    this.lastDemandAt = Date.now();
    for (let i = 0; i < this.opts.count; i++) this.spawn();
    this.log.info({ threads: this.opts.count }, "verification is busy: starting verify threads");
    if (this.opts.startAtPerSecond === 0 || this.idleTimer) return;
    this.idleTimer = setInterval(
      () => this.stopIfIdle(),
      Math.min(15_000, this.opts.idleStopMs / 4),
    ).unref();
  }

  private stopIfIdle(): void {
    if (this.threads.size === 0 || Date.now() - this.lastDemandAt < this.opts.idleStopMs) return;
    this.log.info("verification is quiet: stopping verify threads");
    for (const t of this.threads) void t.retire();
    this.threads.clear();
    this.opts.onReady?.(0);
  }

  private spawn(): void {
    const worker = siblingWorker(import.meta.url, "verifyThread", { workerData: this.input });
    this.threads.add(new VerifyThread(worker, (t, why, crashed) => this.changed(t, why, crashed)));
  }

  private changed(thread: VerifyThread, why?: string, crashed?: boolean): void {
    if (why === undefined) {
      this.opts.onReady?.(this.readyCount);
      return;
    }
    if (!this.threads.delete(thread)) return; // retired: already let go
    this.opts.onReady?.(this.readyCount);
    if (this.closed) return;
    if (!crashed || this.restarts >= MAX_RESTARTS) {
      this.gaveUp = true;
      this.log.warn(
        { why },
        "a verify thread stopped; verification continues on the service thread",
      );
      return;
    }
    this.restarts++;
    this.replacing++;
    this.log.error({ why, restart: this.restarts }, "a verify thread crashed; starting another");
    setTimeout(() => {
      this.replacing--;
      if (!this.closed && !this.gaveUp) this.spawn();
    }, RESTART_DELAY_MS).unref();
  }
}
