/**
 * The composition root: the only module that wires every layer together.
 * It holds no policy: each layer's factory decides its own settings, and
 * this file only connects them. Adding a chain family is one line in
 * `createFamilies`.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { join } from "node:path";
import { sql } from "kysely";
import type { FastifyInstance } from "fastify";
import type { Config } from "./config/index.js";
import { createLogger, type Logger } from "./lib/logger.js";
import { createMetrics, type Metrics } from "./lib/metrics.js";
import { openMigratedDb, type Db, type OpenedDb } from "./storage/db.js";
import { createRedis } from "./storage/redis.js";
import { listenForChanges } from "./storage/changeFeed.js";
import { startSessionPruner } from "./workers/sessionPruner.js";
import { API_KEYS_CHANGED } from "./features/keys/apiKeys.js";
import { pruneExpiredSessions } from "./features/identity/sessions.js";
import type { ChainFamily, FamilyContext } from "./chains/ports.js";
import { createEvm, type EvmSetup } from "./chains/evm/createEvm.js";
import type { SvmSetup } from "./chains/svm/index.js";
import type { XrplSetup } from "./chains/xrpl/index.js";
import type { NearSetup } from "./chains/near/index.js";
import type { StarknetSetup } from "./chains/starknet/index.js";
import { createFacilitator } from "./facilitator/createFacilitator.js";
import type { PaymentFacilitator } from "./facilitator/paymentFacilitator.js";
import { VerifyThreadPool } from "./facilitator/verifyThreadPool.js";
import { ApiKeyAuthenticator } from "./features/keys/authenticator.js";
import { SettlementRecorder } from "./features/settlements/settlementRecorder.js";
import { DbTransactionJournal } from "./features/settlements/transactionJournal.js";
import { DbPendingSettlementStore } from "./features/settlements/pendingSettlementStore.js";
import { checkChains } from "./features/settlements/checkChains.js";
import { DbSignerLeases } from "./features/signers/dbSignerLeases.js";
import { PaymentService } from "./features/payments/paymentService.js";
import { createQuotaLedger } from "./features/plans/quotaLedger.js";
import { readPlanStatus } from "./features/plans/planStatus.js";
import { PaymentIdentifierStore } from "./features/idempotency/paymentIdentifiers.js";
import { createCatalog } from "./features/catalog/createCatalog.js";
import { createReadiness } from "./features/health/readiness.js";
import { SettlementReconciler } from "./workers/settlementReconciler.js";
import { WebhookDeliveryWorker, type WebhookDeliveryOptions } from "./workers/webhookDelivery.js";
import { buildHttpServer } from "./http/server.js";
import { AssetCatalog, type KnownAsset } from "./features/dashboard/assets.js";
import { createDashboard } from "./features/dashboard/dashboard.js";
import {
  createConfidential,
  type ConfidentialFeature,
} from "./features/confidential/createConfidential.js";
import {
  createConfidentialVault,
  type ConfidentialVaultOptions,
} from "./chains/evm/confidential/vault.js";
import {
  ConfidentialWorker,
  type ConfidentialWorkerOptions,
} from "./workers/confidentialWorker.js";
import { SignIn } from "./features/identity/signIn.js";

/** Verify threads stop after a minute without an EVM verification, giving back their memory. */
const VERIFY_THREADS_IDLE_STOP_MS = 60_000;

/** The chains to serve, keyed by family (production: from config; devnet: from the devnet). */
export interface ChainSetup {
  evm?: EvmSetup;
  svm?: SvmSetup;
  xrpl?: XrplSetup;
  near?: NearSetup;
  starknet?: StarknetSetup;
}

export interface ServiceOptions {
  config: Config;
  chains: ChainSetup;
  log?: Logger;
  /** Use an already-open database instead of opening one from config. */
  database?: OpenedDb;
  /** Receipt polling interval override (devnets mine faster than mainnets). */
  pollingIntervalMs?: number;
  /** Signer lease lifetime (default 6 s; heartbeat a third of it). */
  signerLeaseTtlMs?: number;
  /** Run the background reconciler of interrupted settlements (default true). */
  reconcile?: boolean;
  /** Webhook delivery worker: false disables it; an object overrides timings (tests). */
  webhooks?: false | Partial<Omit<WebhookDeliveryOptions, "db" | "log">>;
  collectProcessMetrics?: boolean;
  /** Tokens the registries do not name (the devnet's own copies), for amounts in token units. */
  knownAssets?: readonly KnownAsset[];
  /** The privacy contract and its keys; absent: confidential settlement is not available. */
  confidential?: ConfidentialVaultOptions;
  /** Confidential worker: false disables it; an object overrides its clock and pace (tests). */
  confidentialWorker?: false | Partial<Pick<ConfidentialWorkerOptions, "now" | "pollMs">>;
  /** How long verify threads stay without an EVM verification (default a minute; tests). */
  verifyThreadsIdleStopMs?: number;
}

export interface Service {
  http: FastifyInstance;
  db: Db;
  dbKind: "pglite" | "postgres";
  facilitator: PaymentFacilitator;
  /** Absent when verification runs only on the service's thread (EVM_VERIFY_THREADS=0). */
  verifyThreads: VerifyThreadPool | undefined;
  reconciler: SettlementReconciler;
  webhooks: WebhookDeliveryWorker;
  confidential: ConfidentialFeature;
  confidentialWorker: ConfidentialWorker | undefined;
  auth: ApiKeyAuthenticator;
  metrics: Metrics;
  log: Logger;
  listen(): Promise<string>;
  /** Stops accepting, drains in-flight requests (at most `drainMs`), then closes everything. */
  close(options?: { drainMs?: number }): Promise<void>;
}

/**
 * One entry per chain family. The EVM family is always loaded (its support
 * also serves the dashboard and the confidential vault); every other family
 * is imported only when a network of it is configured, so its SDK costs an
 * EVM-only deployment neither start-up time nor memory.
 */
async function createFamilies(
  chains: ChainSetup,
  config: Config,
  db: Db,
  ctx: FamilyContext,
  metrics: Metrics,
): Promise<ChainFamily[]> {
  const families: ChainFamily[] = [];
  if (chains.evm?.networks.length) {
    families.push(
      await createEvm(
        chains.evm,
        {
          ...config.evm,
          pendingSettlementStore: new DbPendingSettlementStore(db),
          onNativeRecovery: (on) => metrics.nativeRecovery.set(on ? 1 : 0),
        },
        ctx,
      ),
    );
  }
  if (chains.svm?.networks.length) {
    const { createSvm } = await import("./chains/svm/index.js");
    families.push(await createSvm(chains.svm, config.svm, ctx));
  }
  if (chains.xrpl?.networks.length) {
    const { createXrpl } = await import("./chains/xrpl/index.js");
    families.push(createXrpl(chains.xrpl, config.xrpl, ctx));
  }
  if (chains.near?.networks.length) {
    const { createNear } = await import("./chains/near/index.js");
    families.push(createNear(chains.near, config.near, ctx));
  }
  if (chains.starknet?.networks.length) {
    const { createStarknet } = await import("./chains/starknet/index.js");
    families.push(createStarknet(chains.starknet, config.starknet, ctx));
  }
  return families;
}

export async function createService(opts: ServiceOptions): Promise<Service> {
  const { config } = opts;
  const log = opts.log ?? createLogger(config.logLevel);
  const metrics = createMetrics(opts.collectProcessMetrics ?? true);
  const database =
    opts.database ??
    (await openMigratedDb({
      databaseUrl: config.databaseUrl,
      dataDir: join(config.dataDir, "pglite"),
      traffic: {
        statement: () => {
          metrics.dbStatements.inc();
          metrics.dbRoundTrips.inc();
        },
        transactionControl: () => metrics.dbRoundTrips.inc(),
      },
    }));
  const db = database.db;
  const reportError = (e: unknown, what: string) => log.error({ err: String(e) }, `${what} failed`);

  const quota = createQuotaLedger(db, config.plans, reportError);
  const recorder = new SettlementRecorder(db, log.child({ component: "settlements" }), quota);
  const families = await createFamilies(
    opts.chains,
    config,
    db,
    {
      log,
      journal: new DbTransactionJournal(recorder),
      // Every replica may hold the same keys; leases keep each account's nonces
      // with one replica at a time.
      leases: {
        port: new DbSignerLeases(db),
        holder: `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
        ...(opts.signerLeaseTtlMs !== undefined
          ? { ttlMs: opts.signerLeaseTtlMs, heartbeatMs: Math.max(200, opts.signerLeaseTtlMs / 3) }
          : {}),
      },
      settleTimeoutMs: config.settleTimeoutMs,
      onSignerHealth: (network, signer, healthy, balance) => {
        metrics.signerHealthy.set({ network, signer }, healthy ? 1 : 0);
        metrics.signerBalance.set({ network, signer }, balance);
      },
      onTransactionPhase: (network, phase, seconds) =>
        metrics.transactionPhase.observe({ network, phase }, seconds),
      ...(opts.pollingIntervalMs !== undefined
        ? { pollingIntervalMs: opts.pollingIntervalMs }
        : {}),
    },
    metrics,
  );
  const facilitator = createFacilitator(families, config, log);
  const { verifyThreads: threadCount, verifyThreadsAbove, ...evmSettings } = config.evm;
  let verifyThreads: VerifyThreadPool | undefined;
  if (opts.chains.evm?.networks.length && threadCount > 0) {
    verifyThreads = new VerifyThreadPool(
      {
        logLevel: config.logLevel,
        evm: opts.chains.evm,
        evmSettings,
        facilitator: {
          builderCode: config.builderCode,
          builderServiceCode: config.builderServiceCode,
        },
        settleTimeoutMs: config.settleTimeoutMs,
        pollingIntervalMs: opts.pollingIntervalMs,
      },
      {
        count: threadCount,
        startAtPerSecond: verifyThreadsAbove,
        idleStopMs: opts.verifyThreadsIdleStopMs ?? VERIFY_THREADS_IDLE_STOP_MS,
        onReady: (n) => metrics.verifyThreads.set(n),
        onAnswered: () => metrics.verifiedOnThread.inc(),
      },
      log.child({ component: "verify-threads" }),
    );
    facilitator.verifyOn(verifyThreads);
  }
  await Promise.all(families.map((f) => f.start()));

  const chainSince = await checkChains(db, families, log);
  const reconciler = new SettlementReconciler({
    recorder,
    chainSince: (network) => chainSince.get(network),
    reconcile: (pending) => facilitator.reconcile(pending),
    log: log.child({ component: "reconciler" }),
    olderThanMs: config.reconcileAfterMs,
    onFinished: (row) => metrics.reconciled.inc({ network: row.network, status: row.status }),
  });
  if (opts.reconcile !== false) reconciler.start();
  const webhooks = new WebhookDeliveryWorker({
    db,
    log: log.child({ component: "webhooks" }),
    allowPrivateTargets: config.webhooks.allowPrivateTargets,
    ...(opts.webhooks || {}),
  });
  if (opts.webhooks !== false) webhooks.start();

  const auth = new ApiKeyAuthenticator(db, {
    onError: (e) => log.warn({ err: String(e) }, "could not update api key last_used_at"),
  });
  // A key deleted on any replica (or by the CLI) is announced in the shared
  // database: every replica drops its cached lookups at once.
  const keyChanges = listenForChanges(
    config.databaseUrl,
    API_KEYS_CHANGED,
    () => auth.invalidate(),
    log,
  );
  const sessionPruner = startSessionPruner(() => pruneExpiredSessions(db), log);
  const catalog = createCatalog(db, {
    log: log.child({ component: "catalog" }),
    embedded: database.kind === "pglite",
    allowPrivateHosts: config.mode === "devnet",
  });
  const confidentialLog = log.child({ component: "confidential" });
  const vault = opts.confidential
    ? await createConfidentialVault({ ...opts.confidential, log: confidentialLog })
    : undefined;
  const confidential = createConfidential({
    db,
    vault,
    log: confidentialLog,
    units: config.confidential.unitsPerSettlement,
    owner: randomUUID(),
    batchLeaseMs: config.confidential.batchLeaseMs,
  });
  const confidentialWorker =
    confidential.batch && confidential.withdrawals && opts.confidentialWorker !== false
      ? new ConfidentialWorker({
          batch: confidential.batch,
          withdrawals: confidential.withdrawals,
          log: confidentialLog,
          ...(opts.confidentialWorker || {}),
        })
      : undefined;
  confidentialWorker?.start();
  const payments = new PaymentService({
    engine: facilitator,
    recorder,
    log: log.child({ component: "payments" }),
    settleTimeoutMs: config.settleTimeoutMs,
    reconcileAfterMs: config.reconcileAfterMs,
    catalog: catalog.cataloger,
    ...(quota ? { quota } : {}),
    confidential: confidential.gate,
    confidentialUnits: confidential.units,
    timeStage: (stage, seconds) => metrics.settleStage.observe({ stage }, seconds),
    paymentIds: new PaymentIdentifierStore(db, {
      maxWaitMs: config.settleTimeoutMs + 10_000,
      staleAfterMs: 2 * config.settleTimeoutMs + 30_000,
      onError: reportError,
    }),
  });
  // Shared rate-limit counters across replicas; without Redis they are per process.
  const redis = createRedis(config.redisUrl, log);
  const readiness = createReadiness({
    database: async () => void (await sql`select 1`.execute(db)),
    networks: async () => (await Promise.all(families.map((f) => f.probe()))).flat(),
    ...(redis ? { redis: async () => void (await redis.ping()) } : {}),
    onReport: (report) => {
      for (const n of report.networks) {
        metrics.rpcReachable.set({ network: n.network }, n.reachable ? 1 : 0);
      }
    },
  });
  const dashboard = createDashboard({
    db,
    assets: new AssetCatalog(opts.knownAssets, { explorers: config.mode !== "devnet" }),
    plans: config.plans,
    sessionTtlMs: config.auth.sessionTtlMs,
    allowPrivateWebhookTargets: config.webhooks.allowPrivateTargets,
    // This replica forgets the deleted key at once; the others on the change feed below.
    onKeyDeleted: () => auth.invalidate(),
  });
  const http = await buildHttpServer({
    dashboard: {
      dashboard,
      signIn: new SignIn(config.auth.providers),
      sessionTtlMs: config.auth.sessionTtlMs,
      publicUrl: config.auth.publicUrl,
      staticDir: config.auth.dashboardDir,
      confidential,
    },
    confidentialMerchants: confidential.merchants,
    readiness,
    log,
    metrics,
    facilitator,
    payments,
    auth,
    catalog: catalog.reader,
    planStatus: (accountId) => readPlanStatus(db, accountId, config.plans, config.plans.metering),
    bodyLimitBytes: config.bodyLimitBytes,
    mode: config.mode,
    trustProxy: config.http.trustProxy,
    browserAndLimits: {
      corsOrigins: config.http.corsOrigins,
      rateLimitMax: config.http.rateLimitMax,
      rateLimitWindowMs: config.http.rateLimitWindowMs,
      keyRateLimits: config.http.keyRateLimits,
      redis,
    },
  });

  let closed = false;
  return {
    http,
    db,
    dbKind: database.kind,
    facilitator,
    verifyThreads,
    reconciler,
    webhooks,
    confidential,
    confidentialWorker,
    auth,
    metrics,
    log,
    async listen() {
      return http.listen({ host: config.host, port: config.port });
    },
    async close(options: { drainMs?: number } = {}) {
      if (closed) return;
      closed = true;
      // In-flight requests finish (each answer closes its connection); past
      // the drain time the rest are cut, and their settlements stay pending
      // for the reconciler of whichever replica runs next.
      const drain =
        options.drainMs === undefined
          ? undefined
          : setTimeout(() => {
              log.warn({ drainMs: options.drainMs }, "drain time passed; closing open connections");
              http.server.closeAllConnections();
            }, options.drainMs);
      await http.close().finally(() => clearTimeout(drain));
      redis?.disconnect();
      await catalog.cataloger.drain();
      await reconciler.stop();
      await webhooks.stop();
      await confidentialWorker?.stop();
      await vault?.close();
      sessionPruner.stop();
      await keyChanges.close();
      await facilitator.close();
      if (!opts.database) await database.close();
    },
  };
}
