/**
 * Prometheus metrics. One registry per service instance (tests build many).
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

export interface Metrics {
  registry: Registry;
  verifications: Counter<"network" | "result">;
  settlements: Counter<"network" | "outcome">;
  httpDuration: Histogram<"route" | "method" | "status">;
  settleStage: Histogram<"stage">;
  transactionPhase: Histogram<"network" | "phase">;
  signerHealthy: Gauge<"network" | "signer">;
  signerBalance: Gauge<"network" | "signer">;
  signerFloor: Gauge<"network">;
  reconciled: Counter<"network" | "status">;
  webhookAttempts: Counter<"outcome">;
  gasSpent: Counter<"network" | "outcome">;
  nativeRecovery: Gauge;
  verifyThreads: Gauge;
  verifiedOnThread: Counter;
  dbStatements: Counter;
  dbRoundTrips: Counter;
  /** The database's traffic counters, as storage/db.ts reports traffic. */
  dbTraffic: { statement(): void; transactionControl(): void };
}

export function createMetrics(collectProcess = true): Metrics {
  const registry = new Registry();
  if (collectProcess) collectDefaultMetrics({ register: registry });
  const dbStatements = new Counter({
    name: "x402_db_statements_total",
    help: "SQL statements that read or wrote data (transaction commands not included)",
    registers: [registry],
  });
  const dbRoundTrips = new Counter({
    name: "x402_db_round_trips_total",
    help: "Exchanges with the database: every statement, BEGIN, COMMIT and ROLLBACK",
    registers: [registry],
  });
  return {
    registry,
    dbStatements,
    dbRoundTrips,
    dbTraffic: {
      statement: () => {
        dbStatements.inc();
        dbRoundTrips.inc();
      },
      transactionControl: () => dbRoundTrips.inc(),
    },
    verifications: new Counter({
      name: "x402_verifications_total",
      help: "Processed /verify calls by network and result (valid or the invalid reason)",
      labelNames: ["network", "result"],
      registers: [registry],
    }),
    settlements: new Counter({
      name: "x402_settlements_total",
      help: "Processed /settle calls by network and outcome (succeeded or the error reason)",
      labelNames: ["network", "outcome"],
      registers: [registry],
    }),
    httpDuration: new Histogram({
      name: "x402_http_request_duration_seconds",
      help: "HTTP request duration by route",
      labelNames: ["route", "method", "status"],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers: [registry],
    }),
    settleStage: new Histogram({
      name: "x402_settle_stage_seconds",
      help:
        "Time each /settle stage took on its own, the stages after it left out: " +
        "intent and commit are database writes, mechanism is verifying, sending and waiting for the chain",
      labelNames: ["stage"],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
    transactionPhase: new Histogram({
      name: "x402_transaction_phase_seconds",
      help:
        "A settlement transaction's phases: broadcast (simulate, sign, journal, hand to the node) " +
        "and inclusion (from the node's acceptance to its receipt)",
      labelNames: ["network", "phase"],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60],
      registers: [registry],
    }),
    signerHealthy: new Gauge({
      name: "x402_signer_in_rotation",
      help: "1 when a facilitator account has enough gas to be used, 0 when it was taken out of rotation",
      labelNames: ["network", "signer"],
      registers: [registry],
    }),
    signerBalance: new Gauge({
      name: "x402_signer_balance_native",
      help: "Native gas-token balance of each facilitator account, in whole units",
      labelNames: ["network", "signer"],
      registers: [registry],
    }),
    signerFloor: new Gauge({
      name: "x402_signer_balance_floor_native",
      help:
        "The balance, in whole native units, below which a facilitator account of the network " +
        "leaves the rotation (alert while x402_signer_balance_native nears it)",
      labelNames: ["network"],
      registers: [registry],
    }),
    reconciled: new Counter({
      name: "x402_settlements_reconciled_total",
      help: "Interrupted settlements decided from the chain by the reconciler, by outcome",
      labelNames: ["network", "status"],
      registers: [registry],
    }),
    webhookAttempts: new Counter({
      name: "x402_webhook_deliveries_total",
      help:
        "Webhook delivery attempts by outcome: delivered (2xx), retrying (failed, retry scheduled) " +
        "or given_up (failed for the last time)",
      labelNames: ["outcome"],
      registers: [registry],
    }),
    gasSpent: new Counter({
      name: "x402_signer_gas_spent_total",
      help:
        "What our signers' mined settlement transactions cost, in whole native units (ETH, STRK), " +
        "by outcome: success, or reverted (gas spent for nothing)",
      labelNames: ["network", "outcome"],
      registers: [registry],
    }),
    nativeRecovery: new Gauge({
      name: "x402_native_signature_recovery",
      help: "1 when EVM signature recovery runs on libsecp256k1, 0 when it fell back to pure JavaScript",
      registers: [registry],
    }),
    verifyThreads: new Gauge({
      name: "x402_verify_threads",
      help: "Verify threads ready to answer EVM verifications (they start when verification is busy)",
      registers: [registry],
    }),
    verifiedOnThread: new Counter({
      name: "x402_verifications_on_thread_total",
      help: "EVM verifications answered by a verify thread rather than the service's own thread",
      registers: [registry],
    }),
  };
}
