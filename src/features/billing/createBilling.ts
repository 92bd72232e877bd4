/**
 * Billing as the service opens it: the billing account, a payment core of
 * its own (this service's engine and settlement records, without the quota
 * stage: the operator's own account is never refused for its usage, though
 * its successes are counted like any account's), the x402 checkout, what
 * the plans cost and where they are paid, and the sweep that ends periods.
 */
import type { Logger } from "../../lib/logger.js";
import { describeError } from "../../lib/errors.js";
import type { Db } from "../../storage/db.js";
import type { SupportedResponse } from "../../protocol/index.js";
import { exactServerSchemeOf } from "../../chains/index.js";
import type { SettlementRecorder } from "../settlements/settlementRecorder.js";
import type { PaymentEngine } from "../payments/engine.js";
import { PaymentService } from "../payments/paymentService.js";
import {
  BILLING_PERIOD_DAYS,
  DEFAULT_PLAN_PRICES,
  PAYG_FREE_UNITS,
  PAYG_UNIT_PRICE_MICRO_USD,
  usdOf,
  type PlanLimits,
} from "../plans/plans.js";
import { readPlanStatus, type PlanStatus } from "../plans/planStatus.js";
import { ensureBillingAccount } from "./billingAccount.js";
import { BillingCheckout } from "./checkout.js";
import {
  billingHistoryCsv,
  cancelPlanChange,
  choosePlanChange,
  listBillingHistory,
  sweepBilling,
  type BillingHistoryEntry,
  type SweepResult,
} from "./billingLedger.js";

/** What is sold and how it is paid: the price list, public (GET /api/billing/plans). */
export interface BillingOffer {
  /** False: nothing is sold here (no BILLING_NETWORKS); the operator changes plans. */
  enabled: boolean;
  networks: { network: string; chainId: number; asset: string; symbol: "USDC" }[];
  payTo: string | null;
  scheme: "exact";
  periodDays: number;
  prices: { starter: string; pro: string; max: string };
  payg: { freeSettlementsPerMonth: number; usdPerSettlement: string; graceUsd: string };
  topUpMinUsd: string;
  /**
   * Devnet only: funded payer keys of the local chains, so a person can pay
   * in the dashboard without a wallet. Never set in production.
   */
  devnetPayers?: DevnetPayer[];
}

/** A funded devnet payer: its address and the key that signs for it. */
export interface DevnetPayer {
  readonly address: string;
  readonly privateKey: string;
}

export interface BillingFeature {
  offer(): BillingOffer;
  /** Undefined when nothing is sold (the routes answer 503 with the operator command). */
  checkout: BillingCheckout | undefined;
  status(accountId: string): Promise<PlanStatus>;
  history(
    accountId: string,
    explorerUrl: (network: string, tx: string | null) => string | null,
  ): Promise<BillingHistoryEntry[]>;
  historyCsv(entries: readonly BillingHistoryEntry[]): string;
  choosePlanChange(accountId: string, to: "free" | "payg"): Promise<{ effective: Date | null }>;
  cancelPlanChange(accountId: string): Promise<void>;
  /** One pass of the sweep (expiring notices, period ends, pending payments). */
  sweep(now?: Date): Promise<SweepResult>;
  close(): Promise<void>;
}

export async function openBilling(opts: {
  db: Db;
  engine: PaymentEngine;
  recorder: SettlementRecorder;
  supported: () => SupportedResponse;
  /** Every network this service serves: a billing network must be one. */
  served: readonly string[];
  config: {
    mode: "devnet" | "production";
    plans: PlanLimits & { metering: boolean; paygGraceMicroUsd: number };
    billing: { networks: readonly string[]; payTo: string | undefined; topUpMinMicroUsd: number };
    settleTimeoutMs: number;
    reconcileAfterMs: number;
  };
  log: Logger;
  devnetPayers?: readonly DevnetPayer[];
  /** How often the sweep runs (default a minute; 0: never on its own). */
  sweepMs?: number;
}): Promise<BillingFeature> {
  const { db, config } = opts;
  const log = opts.log.child({ component: "billing" });
  const missing = config.billing.networks.filter((n) => !opts.served.includes(n));
  if (missing.length > 0 && config.mode === "production") {
    throw new Error(`BILLING_NETWORKS: ${missing.join(", ")} is not served here`);
  }
  // A devnet serving fewer networks than the default names sells on those it has.
  const networks = config.billing.networks.filter((n) => opts.served.includes(n));
  const prices = { ...DEFAULT_PLAN_PRICES, ...config.plans.prices };
  const limits = {
    prices,
    topUpMinMicroUsd: config.billing.topUpMinMicroUsd,
    paygGraceMicroUsd: config.plans.paygGraceMicroUsd,
  };
  const payTo = config.billing.payTo;
  let checkout: BillingCheckout | undefined;
  if (networks.length > 0 && payTo) {
    const principal = await ensureBillingAccount(db);
    checkout = new BillingCheckout({
      db,
      payments: new PaymentService({
        engine: opts.engine,
        recorder: opts.recorder,
        log: log.child({ component: "billing-payments" }),
        settleTimeoutMs: config.settleTimeoutMs,
        reconcileAfterMs: config.reconcileAfterMs,
      }),
      engine: opts.engine,
      // Each network's exact server scheme, from its family (the table).
      schemes: new Map(
        await Promise.all(networks.map(async (n) => [n, await exactServerSchemeOf(n)] as const)),
      ),
      principal,
      supported: opts.supported,
      networks,
      payTo,
      limits,
      log,
    });
    await checkout.initialize();
  }
  const devnetPayers =
    config.mode === "devnet" && opts.devnetPayers ? [...opts.devnetPayers] : undefined;
  const assets = new Map(checkout?.assets().map((a) => [a.network, a.asset]) ?? []);
  const offer: BillingOffer = {
    enabled: checkout !== undefined,
    networks: networks.map((network) => ({
      network,
      chainId: Number(network.split(":")[1]),
      asset: assets.get(network) ?? "",
      symbol: "USDC",
    })),
    payTo: checkout ? payTo! : null,
    scheme: "exact",
    periodDays: BILLING_PERIOD_DAYS,
    prices: { starter: usdOf(prices.starter), pro: usdOf(prices.pro), max: usdOf(prices.max) },
    payg: {
      freeSettlementsPerMonth: PAYG_FREE_UNITS,
      usdPerSettlement: usdOf(PAYG_UNIT_PRICE_MICRO_USD),
      graceUsd: usdOf(config.plans.paygGraceMicroUsd),
    },
    topUpMinUsd: usdOf(config.billing.topUpMinMicroUsd),
    ...(devnetPayers && checkout ? { devnetPayers } : {}),
  };

  const sweep = (now = new Date()) => sweepBilling(db, limits, now);
  const every = opts.sweepMs ?? 60_000;
  let running: Promise<unknown> = Promise.resolve();
  const timer =
    every > 0
      ? setInterval(() => {
          running = sweep().catch((e: unknown) =>
            log.error({ err: describeError(e) }, "billing sweep failed"),
          );
        }, every)
      : undefined;
  timer?.unref();

  return {
    offer: () => offer,
    checkout,
    status: (accountId) => readPlanStatus(db, accountId, config.plans, config.plans.metering),
    history: (accountId, explorerUrl) => listBillingHistory(db, accountId, explorerUrl),
    historyCsv: billingHistoryCsv,
    choosePlanChange: (accountId, to) => choosePlanChange(db, accountId, to),
    cancelPlanChange: (accountId) => cancelPlanChange(db, accountId),
    sweep,
    async close() {
      if (timer) clearInterval(timer);
      await running;
    },
  };
}
