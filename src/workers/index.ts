/**
 * The background loops, started together and stopped with one call: the
 * reconciler of interrupted settlements, the watcher of recent successes
 * (reorgs), webhook delivery, the pruning of
 * expired dashboard sessions, the discovery catalog's ownership proofs and
 * staleness checks, and confidential settlement's daily batch and
 * withdrawals (when a vault is configured); and the gauges of the backlogs
 * they work through. Tests turn loops off or speed
 * them up through `WorkerOverrides`.
 */
import type { Logger } from "../lib/logger.js";
import type { Metrics } from "../lib/metrics.js";
import type { Db } from "../storage/db.js";
import type { PendingSettlement, ReconcileOutcome } from "../chains/ports.js";
import type { SettlementRecorder } from "../features/settlements/settlementRecorder.js";
import type { ConfidentialFeature } from "../features/confidential/createConfidential.js";
import { pruneExpiredSessions } from "../features/identity/sessions.js";
import { SettlementReconciler } from "./settlementReconciler.js";
import { SuccessWatcher, type SuccessWatcherOptions } from "./successWatcher.js";
import { WebhookDeliveryWorker, type WebhookDeliveryOptions } from "./webhookDelivery.js";
import { startSessionPruner } from "./sessionPruner.js";
import { registerBacklogMetrics } from "./backlogMetrics.js";
import { ConfidentialWorker, type ConfidentialWorkerOptions } from "./confidentialWorker.js";
import { CatalogProofWorker, type CatalogProofOptions } from "./catalogProofs.js";

/**
 * How long a success is watched for a reorg after its answer: about 30
 * blocks of Base, far deeper than the reorgs its chain has seen.
 */
const SUCCESS_WATCH_MS = 60_000;

export interface WorkerOverrides {
  /** Run the background reconciler of interrupted settlements (default true). */
  reconcile?: boolean;
  /** The reorg watch's pace: how long a success is watched, and how often it is asked. */
  successWatch?: Partial<Pick<SuccessWatcherOptions, "windowMs" | "intervalMs">>;
  /** Webhook delivery: false disables it; an object overrides timings. */
  webhooks?: false | Partial<Omit<WebhookDeliveryOptions, "db" | "log" | "onAttempt">>;
  /** The confidential worker: false disables it; an object overrides its clock and pace. */
  confidentialWorker?: false | Partial<Pick<ConfidentialWorkerOptions, "now" | "pollMs">>;
  /** The catalog's proof loop: false disables it; an object overrides its pace. */
  catalogProofs?: false | Partial<Pick<CatalogProofOptions, "pollIntervalMs" | "busyPauseMs">>;
}

export interface Workers {
  reconciler: SettlementReconciler;
  webhooks: WebhookDeliveryWorker;
  confidential: ConfidentialWorker | undefined;
  /** The catalog's proof loop, when the catalog is served. */
  catalogProofs: CatalogProofWorker | undefined;
  /** Stops every loop; each finishes the pass it is in. */
  stop(): Promise<void>;
}

/** What the background loops ask of the chains (the payment engine answers it). */
export interface WorkerChains {
  /** An interrupted settlement's outcome, from its chain. */
  reconcile(pending: PendingSettlement): Promise<ReconcileOutcome>;
  /** A reorged success sent again, where its family can (see `ChainFamily.reland`). */
  reland(pending: PendingSettlement & { id: string }): Promise<ReconcileOutcome> | undefined;
  /** The networks whose successes a reorg can take back (the reorg watch covers them). */
  reorgableNetworks(): readonly string[];
  /** Of one network's successes, those the chain still holds landed, asked together. */
  stillLanded(network: string, references: readonly string[]): Promise<ReadonlySet<string>>;
  /** The served networks (the backlog gauges show each, at 0 when idle). */
  networks(): readonly string[];
}

export function startWorkers(opts: {
  db: Db;
  recorder: SettlementRecorder;
  /** What the loops ask of the chains: the engine answers it. */
  chains: WorkerChains;
  /** Per network, the instant before which records belong to an earlier chain. */
  chainSince: ReadonlyMap<string, Date>;
  config: { reconcileAfterMs: number; webhooks: { allowPrivateTargets: boolean } };
  confidential: ConfidentialFeature;
  /** The discovery catalog's ownership checks (features/catalog/ownershipChecker.ts). */
  catalogProofs?: Pick<CatalogProofOptions, "runDue">;
  metrics: Metrics;
  log: Logger;
  overrides?: WorkerOverrides;
}): Workers {
  const { log, overrides = {} } = opts;
  const reconciler = new SettlementReconciler({
    recorder: opts.recorder,
    chainSince: (network) => opts.chainSince.get(network),
    reconcile: (pending) => opts.chains.reconcile(pending),
    log: log.child({ component: "reconciler" }),
    olderThanMs: opts.config.reconcileAfterMs,
    onFinished: (row) => opts.metrics.reconciled.inc({ network: row.network, status: row.status }),
  });
  const successes = new SuccessWatcher({
    recorder: opts.recorder,
    reconcile: (pending) => opts.chains.reconcile(pending),
    reland: (pending) => opts.chains.reland(pending),
    networks: opts.chains.reorgableNetworks(),
    stillLanded: (network, references) => opts.chains.stillLanded(network, references),
    log: log.child({ component: "success-watcher" }),
    windowMs: SUCCESS_WATCH_MS,
    ...overrides.successWatch,
  });
  if (overrides.reconcile !== false) {
    reconciler.start();
    successes.start();
  }
  const webhooks = new WebhookDeliveryWorker({
    db: opts.db,
    log: log.child({ component: "webhooks" }),
    allowPrivateTargets: opts.config.webhooks.allowPrivateTargets,
    onAttempt: (outcome) => opts.metrics.webhookAttempts.inc({ outcome }),
    ...(overrides.webhooks || {}),
  });
  if (overrides.webhooks !== false) webhooks.start();
  registerBacklogMetrics({
    ...{ db: opts.db, reads: opts.recorder.reads, registry: opts.metrics.registry },
    ...{ reconcileAfterMs: opts.config.reconcileAfterMs, networks: opts.chains.networks() },
    log: log.child({ component: "metrics" }),
  });
  const sessions = startSessionPruner(() => pruneExpiredSessions(opts.db), log);
  const { batch, withdrawals, credits } = opts.confidential;
  const confidential =
    batch && withdrawals && credits && overrides.confidentialWorker !== false
      ? new ConfidentialWorker({
          batch,
          withdrawals,
          credits,
          log: log.child({ component: "confidential" }),
          registry: opts.metrics.registry,
          ...(overrides.confidentialWorker || {}),
        })
      : undefined;
  confidential?.start();
  const catalogProofs =
    opts.catalogProofs && overrides.catalogProofs !== false
      ? new CatalogProofWorker({
          runDue: opts.catalogProofs.runDue,
          log: log.child({ component: "catalog-proofs" }),
          ...(overrides.catalogProofs || {}),
        })
      : undefined;
  catalogProofs?.start();
  return {
    reconciler,
    webhooks,
    confidential,
    catalogProofs,
    async stop() {
      await reconciler.stop();
      await successes.stop();
      await webhooks.stop();
      await confidential?.stop();
      await catalogProofs?.stop();
      sessions.stop();
    },
  };
}
