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

/** Calendar month in UTC, 'YYYY-MM'. */
export function monthOf(at: Date): string {
  return at.toISOString().slice(0, 7);
}

/** Pay-as-you-go units to charge when `used` goes from `before` to `after`. */
export function paygBillableUnits(before: number, after: number): number {
  return Math.max(0, after - PAYG_FREE_UNITS) - Math.max(0, before - PAYG_FREE_UNITS);
}
