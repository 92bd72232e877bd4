/**
 * The payment service with the features its settle stages use: quotas,
 * `payment-identifier` idempotency (its timings follow the settle budget),
 * the catalog and confidential settlement, and the stage timer's metric.
 */
import type { Redis } from "ioredis";
import type { Logger } from "../../lib/logger.js";
import type { Metrics } from "../../lib/metrics.js";
import type { Db } from "../../storage/db.js";
import type { Cataloger } from "../catalog/cataloger.js";
import type { ConfidentialFeature } from "../confidential/createConfidential.js";
import type { ReplicaGuard } from "../health/replicaGuard.js";
import { PaymentIdentifierStore } from "../idempotency/paymentIdentifiers.js";
import type { QuotaLedger } from "../plans/quotaLedger.js";
import type { SettlementRecorder } from "../settlements/settlementRecorder.js";
import type { PaymentEngine } from "./engine.js";
import { PaymentService } from "./paymentService.js";
import { PayerLanes } from "./payerLanes.js";

export function createPayments(opts: {
  db: Db;
  engine: PaymentEngine;
  recorder: SettlementRecorder;
  quota: QuotaLedger | undefined;
  catalog: Cataloger;
  confidential: ConfidentialFeature;
  config: { settleTimeoutMs: number; reconcileAfterMs: number; payerFailureCoolingMs: number };
  /** Shares each payer's lane across replicas, when configured. */
  redis?: Redis | undefined;
  /** Refuses payments while replicas run without Redis. */
  replicaGuard?: ReplicaGuard | undefined;
  metrics: Metrics;
  log: Logger;
  reportError: (e: unknown, what: string) => void;
}): PaymentService {
  const { settleTimeoutMs, reconcileAfterMs } = opts.config;
  return new PaymentService({
    engine: opts.engine,
    recorder: opts.recorder,
    log: opts.log.child({ component: "payments" }),
    settleTimeoutMs,
    reconcileAfterMs,
    payerCoolingMs: opts.config.payerFailureCoolingMs,
    payerLanes: new PayerLanes({
      // A payer's settles each wait for the one before: a queue as long as
      // an agent's parallel calls, waiting about as long as two settles.
      maxWaiting: 32,
      maxWaitMs: 2 * settleTimeoutMs,
      leaseMs: 2 * settleTimeoutMs + 10_000,
      redis: opts.redis,
      log: opts.log,
    }),
    catalog: opts.catalog,
    ...(opts.replicaGuard ? { replicaGuard: opts.replicaGuard } : {}),
    ...(opts.quota ? { quota: opts.quota } : {}),
    confidential: opts.confidential.gate,
    confidentialUnits: opts.confidential.units,
    timeStage: (stage, seconds) => opts.metrics.settleStage.observe({ stage }, seconds),
    paymentIds: new PaymentIdentifierStore(opts.db, {
      // A waiter outlasts the settle it waits for; an id whose process died
      // mid-settle is taken over once it is older than two settles.
      maxWaitMs: settleTimeoutMs + 10_000,
      staleAfterMs: 2 * settleTimeoutMs + 30_000,
      onError: opts.reportError,
    }),
  });
}
