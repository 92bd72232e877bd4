/**
 * Monthly quota: reserve before a settle runs, commit or release after.
 *
 * Invariant: for an account and month, `used + reserved` never exceeds the
 * plan's hard limit. A reservation is one conditional UPDATE
 * (`used + reserved + n <= limit`), which PostgreSQL re-checks on the locked
 * row, so N parallel settles with one unit left give exactly one
 * reservation. The plan is read from the account row on every reservation,
 * so an upgrade (or suspension) applies to the very next request.
 */
import { randomUUID } from "node:crypto";
import { sql, type Transaction } from "kysely";
import type { Db } from "../../storage/db.js";
import type { Database } from "../../storage/schema.js";
import { ServiceError } from "../../lib/errors.js";
import { announceChange } from "../../storage/changeFeed.js";
import { API_KEYS_CHANGED } from "../keys/apiKeys.js";
import {
  PAYG_UNIT_PRICE_MICRO_USD,
  UPGRADE_PATH,
  monthOf,
  paygBillableUnits,
  planRule,
  type PlanLimits,
  type PlanName,
} from "./plans.js";

export interface QuotaReservation {
  accountId: string;
  month: string;
  units: number;
  plan: PlanName;
}

export class QuotaLedger {
  constructor(
    private readonly db: Db,
    private readonly limits: PlanLimits,
    private readonly now: () => Date = () => new Date(),
    /** Told when a commit or release could not be written (the settle's answer stands). */
    private readonly onError: (e: unknown, what: string) => void = () => {},
  ) {}

  /**
   * Commit or release after the settle, never throwing: the payment's outcome
   * is already decided and must reach the caller. A lost release leaves
   * units reserved until the month ends; the error is reported.
   */
  async settle(r: QuotaReservation, counts: boolean, settlementId: string | null): Promise<void> {
    try {
      if (counts) await this.commit(r, settlementId);
      else await this.release(r);
    } catch (e) {
      this.onError(e, counts ? "quota commit" : "quota release");
    }
  }

  /**
   * Reserves `units` for the account's current month, or throws 402
   * (`quota_exceeded`, or `account_suspended`) with the body of spec 2.8.
   */
  async reserve(accountId: string, units: number): Promise<QuotaReservation> {
    const month = monthOf(this.now());
    const account = await this.db
      .selectFrom("accounts")
      .select(["plan", "suspended_at"])
      .where("id", "=", accountId)
      .executeTakeFirst();
    const rule = planRule(account?.plan ?? "free", this.limits);
    await this.db
      .insertInto("quota_usage")
      .values({ account_id: accountId, month })
      .onConflict((oc) => oc.columns(["account_id", "month"]).doNothing())
      .execute();
    if (account?.suspended_at) {
      throw await this.refusal(
        "account_suspended",
        accountId,
        month,
        rule.name,
        rule.reportedLimit,
      );
    }
    let update = this.db
      .updateTable("quota_usage")
      .set({
        reserved: sql<number>`reserved + ${units}`,
        updated_at: new Date(),
      })
      .where("account_id", "=", accountId)
      .where("month", "=", month);
    if (rule.hardLimit !== null) {
      update = update.where(sql<boolean>`used + reserved + ${units} <= ${rule.hardLimit}`);
    }
    const row = await update.returning(["used"]).executeTakeFirst();
    if (!row)
      throw await this.refusal("quota_exceeded", accountId, month, rule.name, rule.reportedLimit);
    return { accountId, month, units, plan: rule.name };
  }

  /** Turns the reservation into usage; for pay-as-you-go, accrues the charge in the same transaction. */
  async commit(r: QuotaReservation, settlementId: string | null): Promise<void> {
    await this.db.transaction().execute(async (tx) => {
      await this.releaseIn(tx, r);
      await this.chargeIn(tx, r.accountId, r.units, settlementId);
    });
  }

  /**
   * Adds `units` of usage for a settlement that just succeeded, in the
   * caller's transaction (the one that records the success), so a payment is
   * billed exactly when, and exactly once, its success is committed. The
   * plan is read now: a late success (a retry or the reconciler learning it
   * from the chain) bills the month and plan in force when it is learned.
   */
  async chargeIn(
    tx: Transaction<Database>,
    accountId: string,
    units: number,
    settlementId: string | null,
  ): Promise<void> {
    if (units <= 0) return;
    const month = monthOf(this.now());
    const account = await tx
      .selectFrom("accounts")
      .select("plan")
      .where("id", "=", accountId)
      .executeTakeFirst();
    const plan = planRule(account?.plan ?? "free", this.limits).name;
    const row = await tx
      .insertInto("quota_usage")
      .values({ account_id: accountId, month, used: units })
      .onConflict((oc) =>
        oc.columns(["account_id", "month"]).doUpdateSet({
          used: sql<number>`quota_usage.used + ${units}`,
          updated_at: new Date(),
        }),
      )
      .returning(["used"])
      .executeTakeFirstOrThrow();
    if (plan !== "payg") return;
    const billable = paygBillableUnits(row.used - units, row.used);
    if (billable <= 0) return;
    await tx
      .insertInto("usage_charges")
      .values({
        id: randomUUID(),
        account_id: accountId,
        month,
        settlement_id: settlementId,
        units: billable,
        amount_micro_usd: billable * PAYG_UNIT_PRICE_MICRO_USD,
      })
      .execute();
  }

  /** Gives a reservation's units back, in the caller's transaction. */
  async releaseIn(tx: Transaction<Database>, r: QuotaReservation): Promise<void> {
    await tx
      .updateTable("quota_usage")
      .set({ reserved: sql<number>`greatest(reserved - ${r.units}, 0)`, updated_at: new Date() })
      .where("account_id", "=", r.accountId)
      .where("month", "=", r.month)
      .execute();
  }

  /** Gives the reserved units back (the settle failed or never ran). */
  async release(r: QuotaReservation): Promise<void> {
    await this.db
      .updateTable("quota_usage")
      .set({ reserved: sql<number>`greatest(reserved - ${r.units}, 0)`, updated_at: new Date() })
      .where("account_id", "=", r.accountId)
      .where("month", "=", r.month)
      .execute();
  }

  private async refusal(
    code: "quota_exceeded" | "account_suspended",
    accountId: string,
    month: string,
    plan: PlanName,
    limit: number,
  ): Promise<ServiceError> {
    const row = await this.db
      .selectFrom("quota_usage")
      .select(["used", "reserved"])
      .where("account_id", "=", accountId)
      .where("month", "=", month)
      .executeTakeFirst();
    // Units held by settles still running count as used: they are why this
    // request was refused, and "9 of 10 used" next to a 402 would read as a bug.
    const inFlight = row?.reserved ?? 0;
    const usedThisMonth = (row?.used ?? 0) + inFlight;
    const settling =
      inFlight > 0
        ? ` (${inFlight} of them belong to settlements still running; a unit comes back if its settlement fails)`
        : "";
    const message =
      code === "account_suspended"
        ? "this pay-as-you-go account is suspended, so /settle is refused; /verify still works. Settle billing, then ask for the account to be resumed"
        : `the ${plan} plan allows ${limit} settlements a month and they are used up${settling}; upgrade the plan to settle again (/verify still works)`;
    // Exactly the fields of spec body 2.8 (the envelope adds error, message, requestId).
    return new ServiceError(code, message, {
      details: { plan, limit, usedThisMonth, upgrade: UPGRADE_PATH },
    });
  }
}

/** The ledger when settlements are metered (plans.metering), else undefined. */
export function createQuotaLedger(
  db: Db,
  plans: PlanLimits & { metering: boolean },
  onError: (e: unknown, what: string) => void,
): QuotaLedger | undefined {
  return plans.metering ? new QuotaLedger(db, plans, undefined, onError) : undefined;
}

/**
 * Sets an account's plan; takes effect on its next settle. The plan also
 * sets its keys' request rate, which replicas read from their cached key
 * lookups: the change is announced so every replica sharing the database
 * drops them and applies the new rate on its next request.
 */
export async function setAccountPlan(db: Db, accountId: string, plan: PlanName): Promise<void> {
  await db.updateTable("accounts").set({ plan }).where("id", "=", accountId).execute();
  await announceChange(db, API_KEYS_CHANGED);
}

/** Suspends (or resumes, with `suspended` false) an account's settlements. */
export async function setAccountSuspended(
  db: Db,
  accountId: string,
  suspended: boolean,
  /** Shown to the account's owner in the dashboard. */
  reason?: string,
): Promise<void> {
  await db
    .updateTable("accounts")
    .set({
      suspended_at: suspended ? new Date() : null,
      suspended_reason: suspended ? reason?.trim() || null : null,
    })
    .where("id", "=", accountId)
    .execute();
}
