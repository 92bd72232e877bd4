/**
 * Builds the service's protocol engine: the chain families it serves (the
 * context they get from the service: journal, leases, pending store,
 * metrics), the engine assembled over them, and verify threads for the
 * families whose verifications earn them. Returns it started.
 */
import type { PendingSettlementStore } from "@x402/core/facilitator";
import type { Logger } from "../lib/logger.js";
import type { Metrics } from "../lib/metrics.js";
import {
  FAMILIES,
  createFamilies,
  servedNamespaces,
  type ChainSetups,
  type FamilySettings,
} from "../chains/index.js";
import type {
  FamilyContext,
  FamilyEntry,
  NetworkDescription,
  SignerLeases,
  SponsoredFundings,
  TransactionJournal,
} from "../chains/ports.js";
import { CONFIDENTIAL_NETWORK } from "../chains/confidentialPort.js";
import { assembleFacilitator, type FacilitatorSettings } from "./assemble.js";
import type { PaymentFacilitator } from "./paymentFacilitator.js";
import { VerifyThreadPool } from "./verifyThreadPool.js";

/** Verify threads stop after a minute without a verification for them, giving back their memory. */
const VERIFY_THREADS_IDLE_STOP_MS = 60_000;

export interface EngineOptions {
  config: {
    families: FamilySettings;
    builderCode: string | undefined;
    builderServiceCode: string | undefined;
    settleTimeoutMs: number;
    logLevel: string;
  };
  chains: ChainSetups;
  /** Every network's settled assets: the families' own and the operator's additions. */
  networks: readonly NetworkDescription[];
  log: Logger;
  metrics: Metrics;
  journal: TransactionJournal;
  leases: SignerLeases;
  /** This process among the replicas: the holder of its signer leases. */
  replicaId: string;
  /** Gas given to payers for their approve: once each, within each account's budget. */
  sponsoredFundings?: SponsoredFundings;
  pendingSettlements: PendingSettlementStore;
  /**
   * The confidential settlement vault's address, when there is one (its
   * payments are collected through it). Only the address: the vault's keys
   * stay with the confidential feature.
   */
  confidentialVault?: `0x${string}` | undefined;
  overrides?: EngineOverrides;
}

/** Test knobs: faster polling, shorter leases, threads that stop sooner. */
export interface EngineOverrides {
  pollingIntervalMs?: number | undefined;
  signerLeaseTtlMs?: number | undefined;
  verifyThreadsIdleStopMs?: number | undefined;
}

export async function createEngine(opts: EngineOptions): Promise<PaymentFacilitator> {
  const { metrics, log, config, overrides = {} } = opts;
  const ttl = overrides.signerLeaseTtlMs;
  const ctx: FamilyContext = {
    log,
    journal: opts.journal,
    ...(opts.sponsoredFundings ? { sponsoredFundings: opts.sponsoredFundings } : {}),
    // Every replica may hold the same keys; leases keep each account's nonces
    // with one replica at a time.
    leases: {
      port: opts.leases,
      holder: opts.replicaId,
      ...(ttl !== undefined ? { ttlMs: ttl, heartbeatMs: Math.max(200, ttl / 3) } : {}),
    },
    settleTimeoutMs: config.settleTimeoutMs,
    pendingSettlements: opts.pendingSettlements,
    onSignerHealth: (network, signer, healthy, balance, floor) => {
      metrics.signerHealthy.set({ network, signer }, healthy ? 1 : 0);
      metrics.signerBalance.set({ network, signer }, balance);
      metrics.signerFloor.set({ network }, floor);
    },
    onTransactionPhase: (network, phase, seconds) =>
      metrics.transactionPhase.observe({ network, phase }, seconds),
    onNativeRecovery: (on) => metrics.nativeRecovery.set(on ? 1 : 0),
    onFeePaid: (network, outcome, fee) => {
      metrics.gasSpent.inc({ network, outcome }, fee);
      if (outcome === "reverted") metrics.failedGas.inc({ network }, fee);
    },
    onFailedGasBudget: (network, budget) => metrics.failedGasBudget.set({ network }, budget),
    ...(opts.confidentialVault
      ? { confidentialVault: { network: CONFIDENTIAL_NETWORK, address: opts.confidentialVault } }
      : {}),
    ...(overrides.pollingIntervalMs !== undefined
      ? { pollingIntervalMs: overrides.pollingIntervalMs }
      : {}),
  };
  const families = await createFamilies(opts.chains, config.families, ctx);
  const settings: FacilitatorSettings = {
    builderCode: config.builderCode,
    builderServiceCode: config.builderServiceCode,
  };
  const facilitator = assembleFacilitator(families, settings, log, opts.networks);
  const threads = startVerifyThreads(opts, settings);
  if (threads) facilitator.verifyOn(threads);
  await Promise.all(families.map((f) => f.start()));
  return facilitator;
}

/** Threads for the served families whose entries ask for them; none when none do. */
function startVerifyThreads(
  opts: EngineOptions,
  facilitator: FacilitatorSettings,
): VerifyThreadPool | undefined {
  const { config, overrides = {} } = opts;
  let count = 0;
  let startAtPerSecond = Infinity;
  const chains: Record<string, unknown> = {};
  for (const ns of servedNamespaces(opts.chains)) {
    const entry = FAMILIES[ns] as FamilyEntry;
    const wanted = entry.verifyThreads?.(config.families[ns]);
    if (!wanted || wanted.count === 0) continue;
    chains[ns] = opts.chains[ns];
    count = Math.max(count, wanted.count);
    startAtPerSecond = Math.min(startAtPerSecond, wanted.startAtPerSecond);
  }
  if (count === 0) return undefined;
  return new VerifyThreadPool(
    {
      logLevel: config.logLevel,
      chains: chains as ChainSetups,
      settings: config.families,
      facilitator,
      settleTimeoutMs: config.settleTimeoutMs,
      pollingIntervalMs: overrides.pollingIntervalMs,
      networks: opts.networks,
    },
    {
      count,
      startAtPerSecond,
      idleStopMs: overrides.verifyThreadsIdleStopMs ?? VERIFY_THREADS_IDLE_STOP_MS,
      onReady: (n) => opts.metrics.verifyThreads.set(n),
      onAnswered: () => opts.metrics.verifiedOnThread.inc(),
    },
    opts.log.child({ component: "verify-threads" }),
  );
}
