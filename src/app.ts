/**
 * The composition root: wiring only. Each area's own `create…` decides its
 * settings (chains and the engine in facilitator/createEngine.ts, payments,
 * keys, confidential settlement, the workers); this file opens them in
 * order and closes them in the reverse order. It names no chain family.
 */
import type { Config } from "./config/index.js";
import { createLogger, type Logger } from "./lib/logger.js";
import { createMetrics } from "./lib/metrics.js";
import { openServiceDb, type OpenedDb } from "./storage/db.js";
import {
  assetKey,
  describeNetworks,
  loadConfidentialVault,
  type ChainSetups,
} from "./chains/index.js";
import type { NetworkDescription } from "./chains/ports.js";
import type { ConfidentialVaultOptions } from "./chains/confidentialPort.js";
import { createEngine, type EngineOverrides } from "./facilitator/createEngine.js";
import { createKeyAuth } from "./features/keys/createKeyAuth.js";
import { checkChains } from "./features/settlements/checkChains.js";
import { openSettlements } from "./features/settlements/openSettlements.js";
import { createPayments } from "./features/payments/createPayments.js";
import { createCatalog } from "./features/catalog/createCatalog.js";
import { serviceReadiness } from "./features/health/readiness.js";
import { newReplicaId, openReplicaSharing } from "./features/health/replicaGuard.js";
import { openDashboard } from "./features/dashboard/dashboard.js";
import { openConfidential } from "./features/confidential/createConfidential.js";
import { openBilling, type DevnetPayer } from "./features/billing/createBilling.js";
import { startWorkers, type WorkerOverrides } from "./workers/index.js";
import { buildHttpServer, closeGracefully } from "./http/server.js";

export interface ServiceOptions {
  config: Config;
  chains: ChainSetups;
  log?: Logger;
  /** Use an already-open database instead of opening one from config. */
  database?: OpenedDb;
  /** Networks the tables do not describe as they run here (the devnet's own token copies). */
  networks?: readonly NetworkDescription[];
  /** The privacy contract and its keys; absent: confidential settlement is not available. */
  confidential?: ConfidentialVaultOptions;
  /** Devnet: funded payers the dashboard offers for paying plans without a wallet. */
  devnetPayers?: readonly DevnetPayer[];
  overrides?: ServiceOverrides;
}

/** Test knobs, in one place: faster chains and loops, shorter leases, no process metrics. */
interface ServiceOverrides extends WorkerOverrides, EngineOverrides {
  collectProcessMetrics?: boolean;
  /** How often billing's sweep runs (0: only when called). */
  billingSweepMs?: number;
  /** How often a replica renews its presence and counts the others. */
  replicaCheckMs?: number;
}

/** A running service: its parts (tests and benchmarks read them), `listen` and `close`. */
export type Service = Awaited<ReturnType<typeof createService>>;

export async function createService(opts: ServiceOptions) {
  const { config, overrides = {} } = opts;
  const log = opts.log ?? createLogger(config.logLevel);
  const metrics = createMetrics(overrides.collectProcessMetrics ?? true);
  // Closed in the reverse order of opening.
  const closers: (() => unknown)[] = [];
  const database =
    opts.database ?? (await openServiceDb(config.databaseUrl, config.dataDir, metrics.dbTraffic));
  if (!opts.database) closers.push(() => database.close());
  const db = database.db;
  const reportError = (e: unknown, what: string) => log.error({ err: String(e) }, `${what} failed`);

  const { quota, recorder, ports } = openSettlements(database, config.plans, log, reportError);
  // The networks as the families describe them, the operator's assets and
  // any local copies beside: what is settled, and how the dashboard names it.
  const networks = [...describeNetworks(), ...config.extraAssets, ...(opts.networks ?? [])];
  const replicaId = newReplicaId();
  const facilitator = await createEngine({
    ...{ config, chains: opts.chains, networks, log, metrics, overrides, ...ports, replicaId },
    confidentialVault: opts.confidential?.contractAddress,
  });
  closers.push(() => facilitator.close());
  const { auth, close: closeKeyAuth } = createKeyAuth(db, config.databaseUrl, log);
  closers.push(closeKeyAuth);
  const catalog = createCatalog(db, {
    log: log.child({ component: "catalog" }),
    embedded: database.kind === "pglite",
    allowPrivateHosts: config.mode === "devnet",
  });
  const confidential = await openConfidential({
    ...{ db, log, settings: config.confidential, vault: opts.confidential },
    loadVault: loadConfidentialVault,
  });
  closers.push(() => confidential.close());
  const workers = startWorkers({
    ...{ db, config, recorder, confidential, metrics, log, overrides },
    catalogProofs: { runDue: () => catalog.ownership.runDue() },
    chains: facilitator,
    chainSince: await checkChains(db, facilitator.servedFamilies, log),
  });
  closers.push(() => workers.stop());
  // Rate limits and payer lanes shared across replicas, and the guard without them.
  const { redis, replicaGuard } = await openReplicaSharing({
    ...{ database, config, replicaId, log, closers, intervalMs: overrides.replicaCheckMs },
  });
  const payments = createPayments({
    ...{ redis, replicaGuard },
    ...{ db, config, recorder, quota, confidential, metrics, log, reportError },
    ...{ engine: facilitator, catalog: catalog.cataloger },
  });
  closers.push(() => catalog.cataloger.drain());
  const billing = await openBilling({
    ...{ db, config, log, recorder, devnetPayers: opts.devnetPayers },
    ...{ engine: facilitator, served: facilitator.networks(), sweepMs: overrides.billingSweepMs },
    supported: () => facilitator.supported(),
  });
  closers.push(() => billing.close());
  const readiness = serviceReadiness({
    ...{ db, networks: () => facilitator.probe(), redis, replicaGuard, metrics },
    log: log.child({ component: "readiness" }),
  });
  const dashboard = openDashboard({
    ...{ db, config, networks, assetKey },
    // This replica forgets a deleted key at once; the others on the change feed.
    onKeyDeleted: () => auth.invalidate(),
  });
  const http = await buildHttpServer({
    dashboard: { ...dashboard, confidential, billing, catalog: catalog.view },
    ...{ confidentialMerchants: confidential.merchants, readiness, log, metrics, facilitator },
    ...(confidential.credits ? { confidentialCredits: confidential.credits } : {}),
    ...{ payments, auth, catalog: catalog.reader, mode: config.mode, billing, plans: config.plans },
    planStatus: dashboard.dashboard.plan,
    ...{ bodyLimitBytes: config.bodyLimitBytes, trustProxy: config.http.trustProxy },
    ...{ publicUrl: config.auth.publicUrl, metricsAccess: config.http },
    browserAndLimits: { ...config.http, redis },
  });
  let closed = false;
  return {
    ...{ http, db, dbKind: database.kind, facilitator, workers, confidential, auth, metrics, log },
    ...{ billing, catalog, payments },
    listen: (): Promise<string> => http.listen({ host: config.host, port: config.port }),
    /** Stops accepting, drains in-flight requests (at most `drainMs`), then closes everything. */
    async close(options: { drainMs?: number } = {}): Promise<void> {
      if (closed) return;
      closed = true;
      await closeGracefully(http, options.drainMs);
      for (const close of closers.reverse()) await close();
    },
  };
}
