/**
 * Finishes settlements that a stopped process left `pending`: on start, and
 * then every few seconds. Each row is decided from the chain by its family
 * and written through the settlements repository with a guarded transition,
 * so replicas (and retries) deciding the same row at once write one answer,
 * one webhook event and one quota charge.
 *
 * Rows started before a network's chain changed identity (a devnet that
 * restarted with a fresh chain) are left alone: that chain never saw them.
 */
import type { Logger } from "../lib/logger.js";
import { describeError } from "../lib/errors.js";
import type { PendingSettlement, ReconcileOutcome } from "../chains/ports.js";
import type { SettlementRecorder } from "../features/settlements/settlementRecorder.js";

export interface ReconcilerOptions {
  recorder: SettlementRecorder;
  reconcile: (pending: PendingSettlement) => Promise<ReconcileOutcome>;
  log: Logger;
  /** Rows younger than this may still belong to a live request. */
  olderThanMs: number;
  intervalMs?: number;
  /** Per network, rows started before this instant belong to another chain. */
  chainSince?: (network: string) => Date | undefined;
  onFinished?: (row: { id: string; network: string; status: "succeeded" | "failed" }) => void;
}

export class SettlementReconciler {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;
  private readonly skipped = new Set<string>();

  constructor(private readonly opts: ReconcilerOptions) {}

  start(): void {
    void this.runOnce();
    this.timer = setInterval(() => void this.runOnce(), this.opts.intervalMs ?? 5_000);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }

  /** One pass; returns how many rows it finished. */
  runOnce(): Promise<number> {
    this.running ??= this.pass().finally(() => (this.running = undefined));
    return this.running;
  }

  private async pass(): Promise<number> {
    const { recorder, log } = this.opts;
    let finished = 0;
    try {
      const rows = await recorder.reads.orphaned(new Date(Date.now() - this.opts.olderThanMs), 50);
      for (const row of rows) {
        const since = this.opts.chainSince?.(row.network);
        if (since && new Date(row.started_at) < since) {
          if (!this.skipped.has(row.id)) {
            this.skipped.add(row.id);
            log.error(
              { settlementId: row.id, network: row.network },
              "not reconciling a settlement started on a previous chain of this network (its genesis changed); it stays pending",
            );
          }
          continue;
        }
        try {
          const pending = await recorder.journal.pendingSettlement(row);
          const outcome = await this.opts.reconcile(pending);
          if (outcome.status === "pending") continue;
          const updated = await recorder.finishFromChain(row.id, outcome, pending.transactions);
          if (updated) {
            finished++;
            log.warn({ settlementId: row.id, outcome }, "reconciled an interrupted settlement");
            this.opts.onFinished?.({ id: row.id, network: row.network, status: outcome.status });
          }
        } catch (e) {
          log.warn(
            { err: describeError(e), settlementId: row.id },
            "could not reconcile settlement yet",
          );
        }
      }
    } catch (e) {
      log.error({ err: describeError(e) }, "settlement reconciliation pass failed");
    }
    return finished;
  }
}
