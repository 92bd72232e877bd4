/**
 * The backlogs the background loops work through, as gauges read from the
 * database when Prometheus scrapes: the webhook outbox, and the settlements
 * still `pending` past the reconciler's horizon (`RECONCILE_AFTER_MS`).
 *
 * Why at scrape time: both are facts of the shared database, not of this
 * process, so a count kept in memory would be wrong on every replica but
 * the one that wrote; and a scrape every few seconds costs the database two
 * reads of partial indexes of pending rows. Every replica reports the same
 * figures: alerts and panels take their `max`.
 *
 * A read that fails leaves the last figures in place (the scrape still
 * answers; readiness reports the database), rather than failing the whole
 * scrape with it.
 */
import { Gauge, type Registry } from "prom-client";
import type { Db } from "../storage/db.js";
import type { Logger } from "../lib/logger.js";
import { describeError } from "../lib/errors.js";
import type { SettlementReads } from "../features/settlements/settlementReads.js";
import { countPendingWebhookEvents } from "../features/webhooks/webhookRepository.js";

export function registerBacklogMetrics(opts: {
  db: Db;
  reads: Pick<SettlementReads, "pendingStartedBefore">;
  registry: Registry;
  /** The reconciler's horizon: rows pending longer are its to decide. */
  reconcileAfterMs: number;
  /** The served networks, shown at 0 when nothing of theirs is stuck. */
  networks: readonly string[];
  log: Logger;
  now?: () => number;
}): void {
  const { log, now = Date.now } = opts;
  const failed = (what: string) => (e: unknown) =>
    log.warn({ err: describeError(e) }, `could not read ${what} for the metrics`);

  new Gauge({
    name: "x402_webhook_outbox_pending",
    help: "Webhook events in the outbox not yet delivered or given up (the shared database's count)",
    registers: [opts.registry],
    async collect() {
      await countPendingWebhookEvents(opts.db).then((n) => this.set(n), failed("the outbox"));
    },
  });

  // Both gauges come from one read, made by whichever collects first.
  let read: Promise<void> | undefined;
  const stuck = new Gauge({
    name: "x402_settlements_past_horizon",
    help:
      "Settlements still pending past the reconciler's horizon (RECONCILE_AFTER_MS), by network: " +
      "the reconciler could not decide them from the chain yet",
    labelNames: ["network"],
    registers: [opts.registry],
    collect: () => (read ??= readStuck().finally(() => (read = undefined))),
  });
  const oldest = new Gauge({
    name: "x402_settlements_past_horizon_oldest_seconds",
    help: "How long the oldest settlement pending past the reconciler's horizon has been past it, by network (0: none)",
    labelNames: ["network"],
    registers: [opts.registry],
    collect: () => (read ??= readStuck().finally(() => (read = undefined))),
  });

  async function readStuck(): Promise<void> {
    const horizon = now() - opts.reconcileAfterMs;
    let rows;
    try {
      rows = await opts.reads.pendingStartedBefore(new Date(horizon));
    } catch (e) {
      failed("pending settlements")(e);
      return;
    }
    stuck.reset();
    oldest.reset();
    for (const network of opts.networks) {
      stuck.set({ network }, 0);
      oldest.set({ network }, 0);
    }
    for (const row of rows) {
      stuck.set({ network: row.network }, row.count);
      oldest.set({ network: row.network }, Math.max(0, (horizon - row.oldest.getTime()) / 1000));
    }
  }
}
