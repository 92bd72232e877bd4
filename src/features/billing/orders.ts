/**
 * What a billing payment buys, and who may buy it: pure rules, no database.
 *
 * - A plan payment buys BILLING_PERIOD_DAYS of a paid plan. A higher plan
 *   (or any paid plan from Free or pay-as-you-go) takes effect at once
 *   (spec: upgrading takes effect immediately); the rest of a lower plan's
 *   period is not refunded. The plan the account is on is renewed: its
 *   period is extended from its end. A lower paid plan, chosen by a person,
 *   is paid now and starts when the current period ends (downgrades take
 *   effect at the end of the paid period).
 * - A top-up adds to pay-as-you-go's prepaid balance, whatever the plan.
 * - An API key may only buy: a higher plan, a renewal, or a top-up. It may
 *   never downgrade, nor move an account away from pay-as-you-go (403): a
 *   leaked key can spend a payer's money on the account, never take
 *   anything from its owner.
 */
import { ServiceError } from "../../lib/errors.js";
import { microUsdOf } from "../../lib/usd.js";
import {
  BILLING_PERIOD_DAYS,
  PLAN_RANK,
  isPaidPlan,
  planNamed,
  usdOf,
  type PaidPlan,
  type PlanName,
  type PlanPrices,
} from "../plans/plans.js";

export type Order = { kind: "plan"; plan: PaidPlan } | { kind: "top_up"; amountMicroUsd: number };

/** Who pays: a program with its API key, or a person in the dashboard. */
export type Buyer = "api_key" | "dashboard";

/** The account's billing state, as its row holds it. */
export interface AccountBilling {
  plan: PlanName;
  paidUntil: Date | null;
  nextPlan: PlanName | null;
  /** The paid days the scheduled change brings; null: it is unpaid. */
  nextPlanDays: number | null;
  balanceMicroUsd: bigint;
  suspended: boolean;
  /** 'billing' when the balance suspended it. */
  suspendedBy: string | null;
}

/** What a plan payment does to the account when it is applied. */
export type PlanEffect = "now" | "renew" | "queued";

export interface Purchase {
  order: Order;
  priceMicroUsd: number;
  /** Plan payments only. */
  effect?: PlanEffect;
  /** The paid period the payment buys (plan payments only). */
  periodStart?: Date;
  periodEnd?: Date;
  /** One line for people: "Pro, 30 days from 2026-11-14". */
  summary: string;
}

export interface OrderLimits {
  prices: PlanPrices;
  topUpMinMicroUsd: number;
}

/** A top-up above this is surely a typo (1,000,000 USD). */
const TOP_UP_MAX_MICRO_USD = 1_000_000 * 1_000_000;

const DAY_MS = 86_400_000;
const NAMES: Record<PlanName, string> = {
  free: "Free",
  starter: "Starter",
  pro: "Pro",
  max: "Max",
  payg: "Pay-as-you-go",
};

export const planLabel = (plan: PlanName): string => NAMES[plan];
const day = (d: Date) => d.toISOString().slice(0, 10);

/** The end of a period of BILLING_PERIOD_DAYS that starts at `start`. */
export function periodEndOf(start: Date, days = BILLING_PERIOD_DAYS): Date {
  return new Date(start.getTime() + days * DAY_MS);
}

/**
 * How a payment for `plan` lands on the account as it is now: at once, as a
 * renewal, or queued after the current period. Also used when the payment
 * is applied, on the locked row, so a payment that raced another is still
 * given its period.
 */
export function planEffect(account: AccountBilling, plan: PaidPlan, now: Date): PlanEffect {
  const current = account.plan;
  const running = account.paidUntil !== null && account.paidUntil > now;
  if (current === plan) return "renew";
  if (!isPaidPlan(current)) return "now";
  if (PLAN_RANK[plan] > PLAN_RANK[current]) return "now";
  // A lower plan waits for the current period when there is one to wait
  // for: what was paid for runs its course. (Pricing refuses it while
  // another paid change waits, and the ledger again on the locked row.)
  return running ? "queued" : "now";
}

/** The period a plan payment buys, given its effect. */
export function periodOf(
  account: AccountBilling,
  effect: PlanEffect,
  now: Date,
): { start: Date; end: Date } {
  const running = account.paidUntil !== null && account.paidUntil > now;
  const start =
    effect === "now"
      ? now
      : effect === "renew"
        ? running
          ? account.paidUntil!
          : now
        : account.paidUntil!;
  return { start, end: periodEndOf(start) };
}

/**
 * Prices an order for this account and buyer, or throws the refusal: 403
 * for what the buyer may not do, 409 for what the account's state does not
 * allow, 400 for an amount out of bounds.
 */
export function priceOrder(
  account: AccountBilling,
  order: Order,
  buyer: Buyer,
  limits: OrderLimits,
  now: Date,
): Purchase {
  if (order.kind === "top_up") {
    const amount = order.amountMicroUsd;
    if (!Number.isSafeInteger(amount) || amount < limits.topUpMinMicroUsd) {
      throw new ServiceError(
        "invalid_request",
        `a top-up is at least ${usdOf(limits.topUpMinMicroUsd)} USD`,
        { details: { topUpMinUsd: usdOf(limits.topUpMinMicroUsd) } },
      );
    }
    if (amount > TOP_UP_MAX_MICRO_USD) {
      throw new ServiceError(
        "invalid_request",
        `a top-up is at most ${usdOf(TOP_UP_MAX_MICRO_USD)} USD`,
      );
    }
    return {
      order,
      priceMicroUsd: amount,
      summary: `Pay-as-you-go top-up of ${usdOf(amount)} USD`,
    };
  }
  const { plan } = order;
  const current = account.plan;
  if (buyer === "api_key") {
    if (current === "payg") {
      throw new ServiceError(
        "forbidden",
        "an API key cannot move an account away from pay-as-you-go: top up its balance instead (POST /api/billing/upgrade with topUpUsd), or a member of the account changes plan in the dashboard",
        { details: { plan: current } },
      );
    }
    if (PLAN_RANK[plan] < PLAN_RANK[current]) {
      throw new ServiceError(
        "forbidden",
        `an API key may only buy a higher plan or renew this one: the account is on ${planLabel(current)}, and a downgrade to ${planLabel(plan)} is chosen by a member of the account in the dashboard`,
        { details: { plan: current } },
      );
    }
  }
  if (current === plan && account.paidUntil === null) {
    throw new ServiceError(
      "conflict",
      `the account is on ${planLabel(plan)} with no end date (set by the operator): there is nothing to renew`,
    );
  }
  const effect = planEffect(account, plan, now);
  if (effect === "queued" && account.nextPlanDays !== null) {
    throw new ServiceError(
      "conflict",
      `a paid change to ${planLabel(account.nextPlan ?? "free")} already waits for the end of this period`,
    );
  }
  const { start, end } = periodOf(account, effect, now);
  const price = limits.prices[plan];
  return {
    order,
    priceMicroUsd: price,
    effect,
    periodStart: start,
    periodEnd: end,
    summary:
      effect === "now"
        ? `${planLabel(plan)} from now until ${day(end)}`
        : effect === "renew"
          ? `${planLabel(plan)} renewed until ${day(end)}`
          : `${planLabel(plan)} from ${day(start)} (when ${planLabel(current)} ends) until ${day(end)}`,
  };
}

/** Reads an order from a request body: `{ plan }` or `{ topUpUsd }`; throws 400 otherwise. */
export function readOrder(body: unknown): Order {
  const b = (body ?? {}) as Record<string, unknown>;
  const plan = b["plan"];
  const topUp = b["topUpUsd"];
  if ((plan === undefined) === (topUp === undefined)) {
    throw new ServiceError(
      "invalid_request",
      'send either {"plan": "starter" | "pro" | "max"} or {"topUpUsd": "10"} (a pay-as-you-go top-up)',
    );
  }
  if (plan !== undefined) {
    if (typeof plan !== "string" || !isPaidPlan(plan)) {
      throw new ServiceError(
        "invalid_request",
        `plan must be starter, pro or max (free and pay-as-you-go are not bought: ${String(plan)})`,
      );
    }
    return { kind: "plan", plan };
  }
  const text = typeof topUp === "number" ? String(topUp) : topUp;
  const amountMicroUsd = typeof text === "string" ? microUsdOf(text) : undefined;
  if (amountMicroUsd === undefined) {
    throw new ServiceError(
      "invalid_request",
      "topUpUsd must be an amount in USD with at most 6 decimals, e.g. 10 or 2.50",
    );
  }
  return { kind: "top_up", amountMicroUsd };
}

/** An account row's billing columns as the rules read them. */
export function accountBillingOf(row: {
  plan: string;
  paid_until: Date | null;
  next_plan: string | null;
  next_plan_days: number | null;
  balance_micro_usd: string;
  suspended_at: Date | null;
  suspended_by: string | null;
}): AccountBilling {
  return {
    plan: planNamed(row.plan),
    paidUntil: row.paid_until,
    nextPlan: row.next_plan === null ? null : planNamed(row.next_plan),
    nextPlanDays: row.next_plan_days,
    balanceMicroUsd: BigInt(row.balance_micro_usd),
    suspended: row.suspended_at !== null,
    suspendedBy: row.suspended_by,
  };
}
