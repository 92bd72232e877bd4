/**
 * What an account's plan allows and how much of it this month has used:
 * the answer behind `GET /api/billing/upgrade`, the link every quota 402
 * carries (body 2.8). Read-only; plan changes go through the operator
 * command line (`npm run keys -- accounts plan …`) until the dashboard
 * takes them over.
 */
import type { Db } from "../../storage/db.js";
import {
  PAYG_FREE_UNITS,
  PAYG_UNIT_PRICE_MICRO_USD,
  PLAN_NAMES,
  monthOf,
  planRule,
  type PlanLimits,
  type PlanName,
} from "./plans.js";

interface PlanOffer {
  plan: PlanName;
  /** Settlements a month before /settle answers 402; pay-as-you-go: included free. */
  monthlySettlements: number;
  /** Pay-as-you-go only: USD per settlement beyond the included ones. */
  usdPerExtraSettlement?: number;
}

export interface PlanStatus {
  accountId: string;
  plan: PlanName;
  suspended: boolean;
  /** The operator's reason, when one was given. */
  suspendedReason: string | null;
  month: string;
  limit: number;
  /** Committed units plus units held by settles still running. */
  usedThisMonth: number;
  /** False when this deployment does not enforce quotas (devnet default). */
  metered: boolean;
  plans: PlanOffer[];
}

function planOffers(limits: PlanLimits): PlanOffer[] {
  return PLAN_NAMES.map((name) => {
    const rule = planRule(name, limits);
    return name === "payg"
      ? {
          plan: name,
          monthlySettlements: PAYG_FREE_UNITS,
          usdPerExtraSettlement: PAYG_UNIT_PRICE_MICRO_USD / 1_000_000,
        }
      : { plan: name, monthlySettlements: rule.reportedLimit };
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
      .select(["plan", "suspended_at", "suspended_reason"])
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
    month,
    limit: rule.reportedLimit,
    usedThisMonth: (usage?.used ?? 0) + (usage?.reserved ?? 0),
    metered,
    plans: planOffers(limits),
  };
}
