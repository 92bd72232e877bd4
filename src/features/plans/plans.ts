/**
 * Plans, what a settle costs in quota units, and how many requests a
 * plan's API keys may make.
 *
 * Pure functions: the plan table is built from config. How many units a
 * settlement costs is the chain family's to say (spec section 8: batch
 * claims count their vouchers, `xrpl:0` never counts). Nothing here touches
 * the database.
 */

export const PLAN_NAMES = ["free", "starter", "pro", "max", "payg"] as const;
export type PlanName = (typeof PLAN_NAMES)[number];

export function isPlanName(v: string): v is PlanName {
  return (PLAN_NAMES as readonly string[]).includes(v);
}

/** The free plan's monthly settlements (spec: 10, no card). */
export const FREE_PLAN_LIMIT = 10;
/** Pay-as-you-go: settlements included each month before charges accrue. */
export const PAYG_FREE_UNITS = 1000;
/** Pay-as-you-go price per unit beyond the free allowance: 0.001 USD. */
export const PAYG_UNIT_PRICE_MICRO_USD = 1000;
/** Where a client is sent to raise its limit (body 2.8). */
export const UPGRADE_PATH = "/api/billing/upgrade";

/** The plans that are paid for by the period (features/billing). */
const PAID_PLANS = ["starter", "pro", "max"] as const;
export type PaidPlan = (typeof PAID_PLANS)[number];

export function isPaidPlan(v: string | null | undefined): v is PaidPlan {
  return (PAID_PLANS as readonly (string | null | undefined)[]).includes(v);
}

/**
 * The ladder of monthly plans by what they allow: an API key may only buy
 * up it (or renew its rung), so a leaked key can spend a payer's money on
 * the account but never take anything from it.
 */
export const PLAN_RANK: Readonly<Record<Exclude<PlanName, "payg">, number>> = {
  free: 0,
  starter: 1,
  pro: 2,
  max: 3,
};

/** What one payment for a plan buys (spec: upgrading takes effect at once). */
export const BILLING_PERIOD_DAYS = 30;

/** Monthly prices of the paid plans, in micro-USD (USDC's atomic unit: 1 USD = 1,000,000). */
export type PlanPrices = Readonly<Record<PaidPlan, number>>;

/**
 * Defaults below pay-as-you-go's price for the same volume (10,000
 * settlements cost 9 USD there, 100,000 cost 99, 1,000,000 cost 999), so a
 * steady customer is better off on a plan and an occasional one on
 * pay-as-you-go. Operators set their own (PLAN_*_PRICE_USD).
 */
export const DEFAULT_PLAN_PRICES: PlanPrices = {
  starter: 5_000_000,
  pro: 49_000_000,
  max: 399_000_000,
};

/** Micro-USD as a dollar string for people: 5000000 → "5.00", 1000 → "0.001". */
export function usdOf(microUsd: number | bigint | string): string {
  const v = BigInt(microUsd);
  const sign = v < 0n ? "-" : "";
  const abs = v < 0n ? -v : v;
  const cents = `${abs / 1_000_000n}.${(abs % 1_000_000n).toString().padStart(6, "0")}`;
  // Two decimals at least, more only when they carry something.
  return sign + cents.replace(/(\.\d\d\d*?)0+$/, "$1");
}

export interface PlanLimits {
  starterLimit: number;
  proLimit: number;
  maxLimit: number;
  /**
   * Settlements an account may see fail on-chain (our gas spent) on one
   * network in an hour before its settles there are refused for a while;
   * free accounts get fewer. Absent: 20 free, 500 paid.
   */
  failuresPerHour?: { free: number; paid: number };
  /** Monthly prices of the paid plans; a plan absent costs its DEFAULT_PLAN_PRICES. */
  prices?: Partial<PlanPrices>;
  /**
   * How far below zero a pay-as-you-go balance may run before the account
   * is suspended, in micro-USD (absent: 0, suspended at the first charge
   * the balance cannot cover).
   */
  paygGraceMicroUsd?: number;
}

/**
 * How many requests an API key may make per window, by its account's plan
 * (0: no limit for that plan). Every key counts on its own; the plan is the
 * account's.
 */
export interface PlanRequestLimits {
  readonly windowMs: number;
  readonly perPlan: Readonly<Record<PlanName, number>>;
}

/** The plan named by an account row; an unknown value is the most restrictive plan. */
export function planNamed(plan: string): PlanName {
  return isPlanName(plan) ? plan : "free";
}

export interface PlanRule {
  name: PlanName;
  /** Hard monthly cap on units; null for pay-as-you-go (charges instead). */
  hardLimit: number | null;
  /** What the 402 body reports as `limit`. */
  reportedLimit: number;
}

export function planRule(plan: string, limits: PlanLimits): PlanRule {
  switch (plan) {
    case "starter":
      return {
        name: "starter",
        hardLimit: limits.starterLimit,
        reportedLimit: limits.starterLimit,
      };
    case "pro":
      return { name: "pro", hardLimit: limits.proLimit, reportedLimit: limits.proLimit };
    case "max":
      return { name: "max", hardLimit: limits.maxLimit, reportedLimit: limits.maxLimit };
    case "payg":
      return { name: "payg", hardLimit: null, reportedLimit: PAYG_FREE_UNITS };
    default:
      // An unknown plan value is treated as the most restrictive one.
      return { name: "free", hardLimit: FREE_PLAN_LIMIT, reportedLimit: FREE_PLAN_LIMIT };
  }
}

/**
 * Whether an account is held to Free's abuse limits (failures, requests):
 * Free, and pay-as-you-go without a positive prepaid balance. Moving from
 * Free to pay-as-you-go costs nothing, so the paid plans' limits come with
 * money held, never with the switch alone.
 */
export function holdsFreeLimits(plan: string | null, balanceMicroUsd: bigint | string): boolean {
  const name = planNamed(plan ?? "free");
  return name === "free" || (name === "payg" && BigInt(balanceMicroUsd) <= 0n);
}

/** Calendar month in UTC, 'YYYY-MM'. */
export function monthOf(at: Date): string {
  return at.toISOString().slice(0, 7);
}

/** Pay-as-you-go units to charge when `used` goes from `before` to `after`. */
export function paygBillableUnits(before: number, after: number): number {
  return Math.max(0, after - PAYG_FREE_UNITS) - Math.max(0, before - PAYG_FREE_UNITS);
}
