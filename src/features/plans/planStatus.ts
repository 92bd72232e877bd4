/**
 * What an account's plan allows, how much of it this month has used, until
 * when it is paid for and what follows, and pay-as-you-go's balance: the
 * answer behind `GET /api/billing/upgrade` (the link every quota 402
 * carries, body 2.8) and the dashboard's Plans tab. Read-only; plans change
 * through billing payments (features/billing) or the operator's comps.
 */
import type { Db } from "../../storage/db.js";
import {
  DEFAULT_PLAN_PRICES,
  PAYG_FREE_UNITS,
  PAYG_UNIT_PRICE_MICRO_USD,
  PLAN_NAMES,
  isPaidPlan,
  monthOf,
  planNamed,
  planRule,
  usdOf,
  type PlanLimits,
  type PlanName,
} from "./plans.js";

interface PlanOffer {
  plan: PlanName;
  /** Settlements a month before /settle answers 402; pay-as-you-go: included free. */
  monthlySettlements: number;
  /** Pay-as-you-go only: USD per settlement beyond the included ones. */
  usdPerExtraSettlement?: number;
  /** Paid plans: what 30 days cost, in USD ("49.00"). */
  usdPerPeriod?: string;
}

export interface PlanStatus {
  accountId: string;
  plan: PlanName;
  suspended: boolean;
  /** The operator's reason, when one was given. */
  suspendedReason: string | null;
  /** `billing` when pay-as-you-go's balance suspended it (a top-up lifts it); else the operator. */
  suspendedBy: string | null;
  /** When the plan's paid period ends (ISO); null when it does not run out. */
  paidUntil: string | null;
  /** The plan taken when the period ends: a change chosen for then, or Free. Null: none ends. */
  nextPlan: PlanName | null;
  /** Whether that change was chosen (a downgrade), rather than the fall back to Free. */
  nextPlanChosen: boolean;
  /** Whether that change is already paid for (a lower plan paid in advance). */
  nextPlanPaid: boolean;
  /** Pay-as-you-go's prepaid balance (may be below zero by the operator's grace). */
  balanceUsd: string;
  balanceMicroUsd: string;
  month: string;
  limit: number;
  /** Committed units plus units held by settles still running. */
  usedThisMonth: number;
  /** False when this deployment does not enforce quotas (devnet default). */
  metered: boolean;
  plans: PlanOffer[];
}

export function planOffers(limits: PlanLimits): PlanOffer[] {
  const prices = { ...DEFAULT_PLAN_PRICES, ...limits.prices };
  return PLAN_NAMES.map((name) => {
    const rule = planRule(name, limits);
    if (name === "payg") {
      return {
        plan: name,
        monthlySettlements: PAYG_FREE_UNITS,
        usdPerExtraSettlement: PAYG_UNIT_PRICE_MICRO_USD / 1_000_000,
      };
    }
    return {
      plan: name,
      monthlySettlements: rule.reportedLimit,
      ...(isPaidPlan(name) ? { usdPerPeriod: usdOf(prices[name]) } : {}),
    };
  });
}

export async function readPlanStatus(
  db: Db,
  accountId: string,
  limits: PlanLimits,
  metered: boolean,
  now: Date = new Date(),
): Promise<PlanStatus> {
  const month = monthOf(now);
  const [account, usage] = await Promise.all([
    db
      .selectFrom("accounts")
      .select([
        "plan",
        "suspended_at",
        "suspended_reason",
        "suspended_by",
        "paid_until",
        "next_plan",
        "next_plan_days",
        "balance_micro_usd",
      ])
      .where("id", "=", accountId)
      .executeTakeFirst(),
    db
      .selectFrom("quota_usage")
      .select(["used", "reserved"])
      .where("account_id", "=", accountId)
      .where("month", "=", month)
      .executeTakeFirst(),
  ]);
  const rule = planRule(account?.plan ?? "free", limits);
  return {
    accountId,
    plan: rule.name,
    suspended: Boolean(account?.suspended_at),
    suspendedReason: account?.suspended_at ? (account.suspended_reason ?? null) : null,
    suspendedBy: account?.suspended_at ? (account.suspended_by ?? null) : null,
    paidUntil: account?.paid_until ? new Date(account.paid_until).toISOString() : null,
    nextPlan: account?.paid_until ? planNamed(account.next_plan ?? "free") : null,
    nextPlanChosen: account?.next_plan != null,
    nextPlanPaid: account?.next_plan_days != null,
    balanceUsd: usdOf(account?.balance_micro_usd ?? 0),
    balanceMicroUsd: String(account?.balance_micro_usd ?? "0"),
    month,
    limit: rule.reportedLimit,
    usedThisMonth: (usage?.used ?? 0) + (usage?.reserved ?? 0),
    metered,
    plans: planOffers(limits),
  };
}
