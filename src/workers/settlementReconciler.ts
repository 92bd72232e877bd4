/**
 * Finishes settlements that a stopped process left `pending`: on start, and
 * then every few seconds. Each row is decided from the chain (see
 * chains/evm/reconcile.ts) and written with a guarded update, so replicas
 * reconciling the same row at once reach and write the same answer.
 */
import { sql } from "kysely";
import type { Db } from "../storage/db.js";
import type { Logger } from "../lib/logger.js";
import type { EvmChainAdapter } from "../chains/evm/index.js";
import { describeError } from "../lib/errors.js";
import { recordSettlementEvent } from "../features/webhooks/events.js";

export interface ReconcilerOptions {
  db: Db;
  evm: EvmChainAdapter;
  log: Logger;
  /** Rows younger than this may still belong to a live request. */
  olderThanMs: number;
  intervalMs?: number;
  onFinished?: (row: { id: string; status: "succeeded" | "failed" }) => void;
}

export class SettlementReconciler {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;

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
    const { db, log } = this.opts;
    let finished = 0;
    try {
      const cutoff = new Date(Date.now() - this.opts.olderThanMs);
      const rows = await db
        .selectFrom("settlements")
        .select(["id", "network", "request", "started_at"])
        .where("status", "=", "pending")
        .where("started_at", "<", cutoff)
        .orderBy("started_at")
        .limit(50)
        .execute();
      for (const row of rows) {
        try {
          const txs = await db
            .selectFrom("settlement_transactions")
            .select(["hash", "raw"])
            .where("settlement_id", "=", row.id)
            .orderBy("created_at")
            .execute();
          const outcome = await this.opts.evm.reconcile(
            row.network,
            row.request,
            txs.map((t) => ({ hash: t.hash as `0x${string}`, raw: t.raw as `0x${string}` })),
          );
          if (outcome.status === "pending") continue;
          // Guarded update and webhook event (outbox) in one transaction.
          const updated = await db.transaction().execute(async (trx) => {
            const done = await trx
              .updateTable("settlements")
              .set({
                status: outcome.status,
                ...(outcome.transaction ? { transaction: outcome.transaction } : {}),
                error_reason: outcome.status === "failed" ? outcome.reason : null,
                error_message: outcome.status === "failed" ? outcome.message : null,
                finished_at: new Date(),
                duration_ms: sql<number>`(extract(epoch from now() - started_at) * 1000)::int`,
              })
              .where("id", "=", row.id)
              .where("status", "=", "pending")
              .returningAll()
              .executeTakeFirst();
            if (done) await recordSettlementEvent(trx, done);
            return done;
          });
          if (updated) {
            finished++;
            log.warn({ settlementId: row.id, outcome }, "reconciled an interrupted settlement");
            this.opts.onFinished?.({ id: row.id, status: outcome.status });
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
