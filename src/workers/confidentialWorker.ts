/**
 * Keeps confidential settlement moving: writes the credits and receipts of
 * payments the reconciler finished, runs the daily batch of every ended day
 * the vault has not closed (yesterday's, and any day whose batch did not
 * run: the vault takes a day's batch at any later time), says when a day is
 * late, and finalizes withdrawals left debited or unconfirmed.
 *
 * It wakes every `pollMs` rather than sleeping until midnight: a replica
 * that was down at 00:00, a clock moved by a test, or a batch whose lease
 * lapsed are all caught on the next pass. The batch row and the operator
 * key's lease make the pass safe to run on every replica at once.
 */
import { Gauge, type Registry } from "prom-client";
import { describeError } from "../lib/errors.js";
import type { Logger } from "../lib/logger.js";
import { dayToDate, utcDay, type ConfidentialCredits } from "../features/confidential/credits.js";
import type { BatchOutcome, DailyBatch } from "../features/confidential/dailyBatch.js";
import type { ConfidentialWithdrawals } from "../features/confidential/withdrawals.js";

/** How far back the sweep looks for settled payments without a credit or receipt. */
const SWEEP_WINDOW_MS = 2 * 86_400_000;
/** A day not closed this long after it ended is late: counted, and logged as an error. */
const DEFAULT_LATE_AFTER_MS = 3 * 3_600_000;
/** How often a late day is logged again while it stays late. */
const LATE_LOG_EVERY_MS = 3_600_000;

export interface ConfidentialWorkerOptions {
  batch: DailyBatch;
  withdrawals: ConfidentialWithdrawals;
  credits: ConfidentialCredits;
  log: Logger;
  /** Where `x402_confidential_unclosed_days` is registered. */
  registry?: Registry;
  /** The clock; tests move it across midnight. */
  now?: () => Date;
  pollMs?: number;
  /** When an unclosed day counts as late (after its end). Default 3 h. */
  lateAfterMs?: number;
}

export class ConfidentialWorker {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private readonly now: () => Date;
  private readonly unclosed: Gauge | undefined;
  private readonly lateLogged = new Map<number, number>();

  constructor(private readonly opts: ConfidentialWorkerOptions) {
    this.now = opts.now ?? (() => new Date());
    this.unclosed = opts.registry
      ? new Gauge({
          name: "x402_confidential_unclosed_days",
          help: "Ended UTC days with confidential payments that the vault has not closed, counted once late (their batch did not finish in time); each is credited when it closes, and until then its merchants' payments are not spendable",
          registers: [opts.registry],
        })
      : undefined;
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
   * One pass: the sweep, the batch of every unclosed ended day (oldest
   * first), the late-day report, then open withdrawals. Returns the
   * outcome of each batch it tried.
   */
  async pass(): Promise<BatchOutcome[]> {
    const outcomes: BatchOutcome[] = [];
    const now = this.now();
    const log = this.opts.log;
    try {
      await this.opts.credits.sweep(new Date(now.getTime() - SWEEP_WINDOW_MS));
    } catch (e) {
      log.warn({ err: describeError(e) }, "could not sweep confidential credits");
    }
    let open: number[] = [];
    try {
      open = await this.opts.batch.openDays(utcDay(now));
    } catch (e) {
      log.error({ err: describeError(e) }, "could not list the confidential days to close");
    }
    const stillOpen: number[] = [];
    for (const day of open) {
      try {
        const outcome = await this.opts.batch.run(day, now);
        outcomes.push(outcome);
        if (!outcome.ran && outcome.why !== "done") stillOpen.push(day);
      } catch (e) {
        stillOpen.push(day);
        log.error(
          { err: describeError(e), day: dayToDate(day) },
          "confidential daily batch failed; retrying",
        );
      }
    }
    this.report(stillOpen, now);
    try {
      await this.opts.withdrawals.finalizeOpen();
    } catch (e) {
      log.warn({ err: describeError(e) }, "could not finalize confidential withdrawals");
    }
    return outcomes;
  }

  /** The late days: the gauge, and an error log per day at most once an hour. */
  private report(open: number[], now: Date): void {
    const lateAfter = this.opts.lateAfterMs ?? DEFAULT_LATE_AFTER_MS;
    const late = open.filter((day) => now.getTime() >= (day + 1) * 86_400_000 + lateAfter);
    this.unclosed?.set(late.length);
    for (const day of [...this.lateLogged.keys()]) {
      if (!late.includes(day)) this.lateLogged.delete(day);
    }
    for (const day of late) {
      const last = this.lateLogged.get(day);
      if (last !== undefined && now.getTime() - last < LATE_LOG_EVERY_MS) continue;
      this.lateLogged.set(day, now.getTime());
      this.opts.log.error(
        {
          day: dayToDate(day),
          endedHoursAgo: Math.floor((now.getTime() - (day + 1) * 86_400_000) / 3_600_000),
        },
        "a confidential day is not closed: its merchants' payments are not spendable until it is; its receipts become redeemable a day after it ended",
      );
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }
}
