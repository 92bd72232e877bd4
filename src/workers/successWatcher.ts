/**
 * Keeps watching settlements answered `success: true` for a while after
 * the answer, because the chain can take a block back (a reorg) and with it
 * the transfer we promised. Each recent success is asked of the chain by
 * its family's reconciliation (the same code that finishes interrupted
 * settlements): a transaction no longer on the canonical chain is re-sent
 * exactly as it was signed and journaled (same hash, same nonce: it cannot
 * move money twice), and lands again. Only when the family says it can no
 * longer land (its nonce was taken by another transaction, its
 * authorization was used elsewhere or expired), and says so on two passes
 * in a row (one unreadable receipt is not a verdict), is the success
 * recorded as failed, with a `settlement.failed` event and its quota charge
 * given back: the records then agree with the chain. The journal keeps a
 * success's signed bytes for exactly that re-send, and this watcher drops
 * them once the watch is over.
 */
import type { Logger } from "../lib/logger.js";
import { describeError } from "../lib/errors.js";
import type { PendingSettlement, ReconcileOutcome } from "../chains/ports.js";
import type { SettlementRecorder } from "../features/settlements/settlementRecorder.js";

export interface SuccessWatcherOptions {
  recorder: SettlementRecorder;
  reconcile: (pending: PendingSettlement) => Promise<ReconcileOutcome>;
  log: Logger;
  /** How long after its answer a success is watched. */
  windowMs: number;
  intervalMs?: number;
  /** Told of each success taken back: re-sent, or recorded failed. */
  onTakenBack?: (row: { id: string; network: string; outcome: "resent" | "failed" }) => void;
}

/** At most this many successes are asked of the chain per pass. */
const PER_PASS = 200;

/** Signed material past its watch is swept every this many passes. */
const DROP_EVERY_PASSES = 10;

export class SuccessWatcher {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  /** Successes the chain said could not land on the last pass. */
  private readonly doomed = new Set<string>();
  private passes = 0;

  constructor(private readonly opts: SuccessWatcherOptions) {}

  start(): void {
    this.timer = setInterval(() => void this.runOnce(), this.opts.intervalMs ?? 3_000);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }

  runOnce(): Promise<void> {
    this.running ??= this.pass().finally(() => (this.running = undefined));
    return this.running;
  }

  private async pass(): Promise<void> {
    const { recorder, log } = this.opts;
    let rows;
    try {
      rows = await recorder.recentSuccesses(new Date(Date.now() - this.opts.windowMs), PER_PASS);
    } catch (e) {
      log.warn({ err: describeError(e) }, "could not read recent successes");
      return;
    }
    const seen = new Set<string>();
    for (const row of rows) {
      seen.add(row.id);
      try {
        const outcome = await this.opts.reconcile(await recorder.pendingSettlement(row));
        if (outcome.status === "succeeded") {
          this.doomed.delete(row.id);
          continue;
        }
        if (outcome.status === "pending") {
          this.doomed.delete(row.id);
          log.warn(
            { settlementId: row.id, network: row.network, transaction: row.transaction },
            "a settled payment's transaction left the canonical chain (a reorg); re-sent it from the journal",
          );
          this.opts.onTakenBack?.({ id: row.id, network: row.network, outcome: "resent" });
          continue;
        }
        if (!this.doomed.has(row.id)) {
          this.doomed.add(row.id);
          continue;
        }
        this.doomed.delete(row.id);
        const revoked = await recorder.revokeSuccess(row.id, outcome);
        if (revoked) {
          log.error(
            { settlementId: row.id, network: row.network, outcome },
            "a settled payment's transaction left the canonical chain and can no longer land; recorded it failed",
          );
          this.opts.onTakenBack?.({ id: row.id, network: row.network, outcome: "failed" });
        }
      } catch (e) {
        log.warn(
          { err: describeError(e), settlementId: row.id },
          "could not recheck a success yet",
        );
      }
    }
    for (const id of this.doomed) if (!seen.has(id)) this.doomed.delete(id);
    // Once a success's watch is over nothing will send it again, so its
    // signed bytes need not stay at rest. Not every pass: it is a sweep.
    if (++this.passes % DROP_EVERY_PASSES === 0) {
      try {
        await recorder.dropSignedMaterial(new Date(Date.now() - this.opts.windowMs));
      } catch (e) {
        log.warn({ err: describeError(e) }, "could not drop signed material yet");
      }
    }
  }
}
