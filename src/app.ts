/**
 * The composition root: the only module that wires every layer together.
 * `createService` builds a complete, listening-ready service from a config
 * and the chain setups; tests and `main.ts` both use it.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import type { FastifyInstance } from "fastify";
import type { Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { Config } from "./config/index.js";
import { createLogger, type Logger } from "./lib/logger.js";
import { createMetrics, type Metrics } from "./lib/metrics.js";
import { openMigratedDb, type Db, type OpenedDb } from "./storage/db.js";
import { EvmChainAdapter, type EvmNetworkSetup } from "./chains/evm/index.js";
import { routeViemRecoveryToNative } from "./chains/evm/viemNativeRecovery.js";
import { batchingUrls } from "./chains/evm/rpcBatchProbe.js";
import { PaymentFacilitator, createEngine } from "./facilitator/paymentFacilitator.js";
import { ApiKeyAuthenticator } from "./features/keys/authenticator.js";
import { SettlementRecorder } from "./features/settlements/settlementRecorder.js";
import { checkChainIdentity } from "./features/settlements/chainIdentities.js";
import { DbTransactionJournal } from "./features/settlements/transactionJournal.js";
import { DbPendingSettlementStore } from "./features/settlements/pendingSettlementStore.js";
import { SettlementReconciler } from "./workers/settlementReconciler.js";
import { WebhookDeliveryWorker, type WebhookDeliveryOptions } from "./workers/webhookDelivery.js";
import { DbSignerLeases } from "./features/signers/dbSignerLeases.js";
import { PaymentService } from "./features/payments/paymentService.js";
import { BAZAAR } from "@x402/extensions/bazaar";
import { PAYMENT_IDENTIFIER } from "@x402/extensions/payment-identifier";
import { EIP2612_GAS_SPONSORING } from "@x402/extensions";
import { BuilderCodeFacilitatorExtension } from "@x402/extensions/builder-code";
import { QuotaLedger } from "./features/plans/quotaLedger.js";
import { readPlanStatus } from "./features/plans/planStatus.js";
import { PaymentIdentifierStore } from "./features/idempotency/paymentIdentifiers.js";
import { Cataloger } from "./features/catalog/cataloger.js";
import { CatalogReader } from "./features/catalog/catalogReader.js";
import { ReadCache } from "./features/catalog/readCache.js";
import {
  READ_CACHE_MAX_BYTES,
  READ_CACHE_STALE_MS,
  READ_CACHE_TTL_MS,
} from "./features/catalog/limits.js";
import { buildHttpServer } from "./http/server.js";
import { createReadiness } from "./features/health/readiness.js";
import { sql } from "kysely";

export interface ChainSetup {
  evm: { networks: readonly EvmNetworkSetup[]; privateKeys: readonly Hex[] };
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
}

export interface Service {
  http: FastifyInstance;
  db: Db;
  dbKind: "pglite" | "postgres";
  facilitator: PaymentFacilitator;
  reconciler: SettlementReconciler;
  webhooks: WebhookDeliveryWorker;
  auth: ApiKeyAuthenticator;
  metrics: Metrics;
  log: Logger;
  listen(): Promise<string>;
  /** Stops accepting, drains in-flight requests (at most `drainMs`), then closes everything. */
  close(options?: { drainMs?: number }): Promise<void>;
}

export async function createService(opts: ServiceOptions): Promise<Service> {
  const { config } = opts;
  const log = opts.log ?? createLogger(config.logLevel);
  const database =
    opts.database ??
    (await openMigratedDb({
      databaseUrl: config.databaseUrl,
      dataDir: join(config.dataDir, "pglite"),
    }));
  const metrics = createMetrics(opts.collectProcessMetrics ?? true);

  if (config.nativeRecovery) {
    // Signature checks inside @x402/evm run on libsecp256k1 (see the module).
    const recovery = await routeViemRecoveryToNative();
    metrics.nativeRecovery.set(recovery.active ? 1 : 0);
    if (!recovery.active) {
      log.warn(
        { why: recovery.why },
        "native signature recovery is off; verification uses pure JS",
      );
    }
  }

  const rpcUrls = opts.chains.evm.networks.flatMap((n) => n.rpcUrls);
  const rpcBatching =
    config.rpcBatchSize > 0
      ? {
          batchSize: config.rpcBatchSize,
          urls: await batchingUrls(rpcUrls, log.child({ component: "evm" })),
        }
      : undefined;

  const engine = createEngine();
  // Advertised in GET /supported; cataloging itself runs in PaymentService.
  engine.registerExtension(BAZAAR);
  // Advertised likewise; idempotent settle runs in PaymentService.
  engine.registerExtension({ key: PAYMENT_IDENTIFIER });
  // A payer's EIP-2612 permit for Permit2 rides along and the Permit2 proxy's
  // settleWithPermit spends it: gasless onboarding (the mechanisms do the work).
  engine.registerExtension(EIP2612_GAS_SPONSORING);
  // ERC-8021 attribution: the mechanisms append the suffix this builds to the
  // settlement calldata, with the resource server's, the client's and our codes.
  engine.registerExtension(
    new BuilderCodeFacilitatorExtension({
      ...(config.builderCode ? { builderCode: config.builderCode } : {}),
      ...(config.builderServiceCode ? { serviceCode: config.builderServiceCode } : {}),
    }),
  );
  const evm = new EvmChainAdapter({
    networks: opts.chains.evm.networks,
    privateKeys: opts.chains.evm.privateKeys,
    confirmationTimeoutMs: config.settleTimeoutMs,
    log: log.child({ component: "evm" }),
    journal: new DbTransactionJournal(database.db),
    pendingSettlementStore: new DbPendingSettlementStore(database.db),
    minSignerBalanceWei: config.minSignerBalanceWei,
    eip6492AllowedFactories: config.erc6492AllowedFactories,
    ...(rpcBatching ? { rpcBatching } : {}),
    ...(config.batchAuthorizerKey
      ? { batchAuthorizer: privateKeyToAccount(config.batchAuthorizerKey) }
      : {}),
    // Every replica may hold the same keys; leases keep each account's nonces
    // with one replica at a time.
    leases: {
      port: new DbSignerLeases(database.db),
      holder: `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
      ...(opts.signerLeaseTtlMs !== undefined
        ? { ttlMs: opts.signerLeaseTtlMs, heartbeatMs: Math.max(200, opts.signerLeaseTtlMs / 3) }
        : {}),
    },
    onSignerHealth: (network, address, healthy, balance) => {
      metrics.signerHealthy.set({ network, signer: address }, healthy ? 1 : 0);
      metrics.signerBalance.set({ network, signer: address }, Number(balance) / 1e18);
    },
    ...(config.stuckTxMs !== undefined ? { stuckAfterMs: config.stuckTxMs } : {}),
    ...(opts.pollingIntervalMs !== undefined ? { pollingIntervalMs: opts.pollingIntervalMs } : {}),
  });
  evm.register(engine);
  await evm.start();
  const facilitator = new PaymentFacilitator(
    engine,
    [evm],
    log.child({ component: "facilitator" }),
  );
  const quota = config.plans.metering
    ? new QuotaLedger(database.db, config.plans, undefined, (e, what) =>
        log.error({ err: String(e) }, `${what} failed`),
      )
    : undefined;
  const recorder = new SettlementRecorder(
    database.db,
    log.child({ component: "settlements" }),
    quota,
  );
  const chainSince = new Map<string, Date>();
  for (const network of evm.networks().keys()) {
    const genesis = await evm.identity(network).catch(() => undefined);
    if (!genesis) continue;
    const check = await checkChainIdentity(database.db, network, genesis);
    chainSince.set(network, check.since);
    if (check.replaced) {
      log.error(
        { network, previousGenesis: check.previous, genesis },
        "this network's chain is not the one the database knew (a fresh devnet, or an RPC on another chain); settlements recorded before now will not be reconciled against it",
      );
    }
  }
  const reconciler = new SettlementReconciler({
    recorder,
    chainSince: (network) => chainSince.get(network),
    reconcile: (pending) => facilitator.reconcile(pending),
    log: log.child({ component: "reconciler" }),
    olderThanMs: config.reconcileAfterMs,
  });
  if (opts.reconcile !== false) reconciler.start();
  const webhooks = new WebhookDeliveryWorker({
    db: database.db,
    log: log.child({ component: "webhooks" }),
    allowPrivateTargets: config.webhooks.allowPrivateTargets,
    ...(opts.webhooks || {}),
  });
  if (opts.webhooks !== false) webhooks.start();
  const auth = new ApiKeyAuthenticator(database.db, {
    onError: (e) => log.warn({ err: String(e) }, "could not update api key last_used_at"),
  });
  const catalogLog = log.child({ component: "catalog" });
  const catalogCache = new ReadCache<unknown>({
    ttlMs: READ_CACHE_TTL_MS,
    staleMs: READ_CACHE_STALE_MS,
    jitter: 0.2,
    maxBytes: READ_CACHE_MAX_BYTES,
    onBackgroundError: (e) => catalogLog.warn({ err: String(e) }, "catalog read refresh failed"),
  });
  const cataloger = new Cataloger(database.db, catalogLog, {
    allowPrivateHosts: config.mode === "devnet",
    onChange: () => catalogCache.invalidate(),
  });
  const payments = new PaymentService({
    engine: facilitator,
    recorder,
    log: log.child({ component: "payments" }),
    settleTimeoutMs: config.settleTimeoutMs,
    reconcileAfterMs: config.reconcileAfterMs,
    catalog: cataloger,
    ...(quota ? { quota } : {}),
    paymentIds: new PaymentIdentifierStore(database.db, {
      maxWaitMs: config.settleTimeoutMs + 10_000,
      staleAfterMs: 2 * config.settleTimeoutMs + 30_000,
      onError: (e, what) => log.error({ err: String(e) }, `${what} failed`),
    }),
  });
  // Shared rate-limit counters across replicas; without Redis they are per process.
  const redis = config.redisUrl
    ? new Redis(config.redisUrl, {
        maxRetriesPerRequest: 1,
        enableOfflineQueue: false,
        lazyConnect: false,
      })
    : undefined;
  redis?.on("error", (e: Error) =>
    log.warn({ err: e.message }, "redis error (rate limits fall back to serving)"),
  );
  const readiness = createReadiness({
    database: async () => {
      await sql`select 1`.execute(database.db);
    },
    networks: () => evm.probe(),
    ...(redis ? { redis: async () => void (await redis.ping()) } : {}),
    onReport: (report) => {
      for (const n of report.networks)
        metrics.rpcReachable.set({ network: n.network }, n.reachable ? 1 : 0);
    },
  });
  const http = await buildHttpServer({
    readiness,
    log,
    metrics,
    facilitator,
    payments,
    auth,
    // One embedded connection: keep discovery to two queries at a time so
    // payment queries are never stuck behind a burst of searches.
    catalog: new CatalogReader(database.db, catalogCache, database.kind === "pglite" ? 2 : 8),
    planStatus: (accountId) =>
      readPlanStatus(database.db, accountId, config.plans, config.plans.metering),
    bodyLimitBytes: config.bodyLimitBytes,
    mode: config.mode,
    trustProxy: config.http.trustProxy,
    browserAndLimits: {
      corsOrigins: config.http.corsOrigins,
      rateLimitMax: config.http.rateLimitMax,
      rateLimitWindowMs: config.http.rateLimitWindowMs,
      redis,
    },
  });

  let closed = false;
  return {
    http,
    db: database.db,
    dbKind: database.kind,
    facilitator,
    reconciler,
    webhooks,
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
      await cataloger.drain();
      await reconciler.stop();
      await webhooks.stop();
      await facilitator.close();
      if (!opts.database) await database.close();
    },
  };
}
