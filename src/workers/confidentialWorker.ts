/**
 * Runs the confidential daily batch when a UTC day begins, and finalizes
 * withdrawals left debited (by a crash or a failed finalization).
 *
 * It wakes every `pollMs` rather than sleeping until midnight: a replica
 * that was down at 00:00, a clock moved by a test, or a batch whose lease
 * lapsed are all caught on the next pass. The batch row makes the pass
 * idempotent, so every replica may run this worker.
 */
import { describeError } from "../lib/errors.js";
import type { Logger } from "../lib/logger.js";
import { utcDay } from "../features/confidential/credits.js";
import type { BatchOutcome, DailyBatch } from "../features/confidential/dailyBatch.js";
import type { ConfidentialCredits } from "../features/confidential/credits.js";
import type { ConfidentialWithdrawals } from "../features/confidential/withdrawals.js";

/** How far back the sweep looks for settled payments without a credit. */
const SWEEP_WINDOW_MS = 2 * 86_400_000;

export interface ConfidentialWorkerOptions {
  batch: DailyBatch;
  withdrawals: ConfidentialWithdrawals;
  credits: ConfidentialCredits;
  log: Logger;
  /** The clock; tests move it across midnight. */
  now?: () => Date;
  pollMs?: number;
}

export class ConfidentialWorker {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private readonly now: () => Date;

  constructor(private readonly opts: ConfidentialWorkerOptions) {
    this.now = opts.now ?? (() => new Date());
  }

  start(): void {
    const tick = () => {
      this.running ??= this.pass()
        .then(() => undefined)
        .finally(() => (this.running = undefined));
    };
    tick();
    this.timer = setInterval(tick, this.opts.pollMs ?? 30_000);
    this.timer.unref();
  }

  /**
   * One pass: the credits and receipts of payments settled without them
   * (the reconciler finished them), yesterday's batch if it has not run,
   * then open withdrawals.
   */
  async pass(): Promise<BatchOutcome | undefined> {
    let outcome: BatchOutcome | undefined;
    const now = this.now();
    try {
      await this.opts.credits.sweep(new Date(now.getTime() - SWEEP_WINDOW_MS));
    } catch (e) {
      this.opts.log.warn({ err: describeError(e) }, "could not sweep confidential credits");
    }
    // The batch of the day that ended at the last 00:00 UTC.
    const day = utcDay(now) - 1;
    try {
      if (!(await this.opts.batch.isDone(day))) outcome = await this.opts.batch.run(day, now);
    } catch (e) {
      this.opts.log.error(
        { err: describeError(e), day },
        "confidential daily batch failed; retrying",
      );
    }
    try {
      await this.opts.withdrawals.finalizeOpen();
    } catch (e) {
      this.opts.log.warn({ err: describeError(e) }, "could not finalize confidential withdrawals");
    }
    return outcome;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }
}
