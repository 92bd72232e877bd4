/**
 * Billing's writes: a payment's record and what it changes on the account,
 * an operator's comp, a change chosen for the end of the period, and the
 * sweep that ends periods.
 *
 * Money truth:
 * - A payment's row is written `pending` before the payment is settled
 *   (`beginPayment`), so a payment that lands is never unknown: if the
 *   request dies after the transfer, the sweep finds the row and the
 *   settlement's record and applies it.
 * - It is applied exactly once: `applyPayment` turns the row `paid` with a
 *   guarded update (`status = 'pending'`) and changes the plan or balance in
 *   the same transaction, so the payment record and the change commit
 *   together or not at all, whichever request or replica gets there first.
 *   Its webhook events are written in that transaction too.
 * - One row per signed payment (the settlement's authorization key is
 *   unique), so the same payment presented again, by anyone, finds it.
 * - A failed payment changes nothing; its row is `failed`, and the same
 *   authorization may be presented again (nothing moved).
 */
import { randomUUID } from "node:crypto";
import { sql, type Insertable, type Selectable, type Transaction } from "kysely";
import type { Db } from "../../storage/db.js";
import type { BillingPaymentsTable, Database } from "../../storage/schema.js";
import { announceChange } from "../../storage/changeFeed.js";
import { ServiceError } from "../../lib/errors.js";
import { API_KEYS_CHANGED } from "../keys/apiKeys.js";
import { recordBillingEvent } from "../webhooks/billingEvents.js";
import { BILLING_SUSPENSION } from "../plans/quotaLedger.js";
import { isPaidPlan, planNamed, usdOf, type PaidPlan, type PlanName } from "../plans/plans.js";
import { BILLING_ACCOUNT_ID } from "./billingAccount.js";
import {
  accountBillingOf,
  periodEndOf,
  periodOf,
  planEffect,
  planLabel,
  type AccountBilling,
  type Buyer,
  type Purchase,
} from "./orders.js";

export type BillingPaymentRow = Selectable<BillingPaymentsTable>;

const ACCOUNT_BILLING_COLUMNS = [
  "plan",
  "paid_until",
  "next_plan",
  "next_plan_days",
  "balance_micro_usd",
  "suspended_at",
  "suspended_by",
] as const;

export async function readAccountBilling(db: Db, accountId: string): Promise<AccountBilling> {
  const row = await db
    .selectFrom("accounts")
    .select([...ACCOUNT_BILLING_COLUMNS])
    .where("id", "=", accountId)
    .executeTakeFirst();
  if (!row) throw new ServiceError("not_found", "no such account");
  return accountBillingOf(row);
}

/** What the verified payment says about itself, recorded with its row. */
export interface PaymentDetails {
  authorizationKey: string;
  network: string;
  asset: string;
  payTo: string;
  payer: string | null;
}

/**
 * Writes the payment's row `pending`, before it is settled. Returns the row
 * that holds its authorization: this new one (`fresh`), or the one an
 * earlier presentation wrote (not fresh), which decides instead. A row
 * whose settle failed (nothing moved) is taken over by the same account.
 */
export async function beginPayment(
  db: Db,
  input: {
    accountId: string;
    purchase: Purchase;
    source: Buyer;
    details: PaymentDetails;
  },
  now: Date = new Date(),
): Promise<{ row: BillingPaymentRow; fresh: boolean }> {
  const { purchase, details } = input;
  const values = {
    id: randomUUID(),
    account_id: input.accountId,
    kind: purchase.order.kind,
    plan: purchase.order.kind === "plan" ? purchase.order.plan : null,
    amount_micro_usd: purchase.priceMicroUsd,
    status: "pending" as const,
    source: input.source,
    authorization_key: details.authorizationKey,
    network: details.network,
    asset: details.asset.toLowerCase(),
    pay_to: details.payTo.toLowerCase(),
    payer: details.payer?.toLowerCase() ?? null,
    period_start: purchase.periodStart ?? null,
    period_end: purchase.periodEnd ?? null,
  };
  const written = await db.transaction().execute(async (trx) => {
    if (purchase.order.kind === "plan") {
      await refuseSecondAdvance(
        trx,
        input.accountId,
        purchase.order.plan,
        values.authorization_key,
        now,
      );
    }
    return insertPending(trx, values, input.accountId);
  });
  if (written) return { row: written, fresh: true };
  const existing = await findPayment(db, details.authorizationKey);
  if (!existing) throw new Error("billing payment row vanished");
  return { row: existing, fresh: false };
}

/**
 * One plan paid in advance at a time: a lower plan bought for after the
 * current period is refused (409, before anything is settled) while another
 * one waits, applied or still being settled. Decided on the locked account
 * row, so orders priced together are taken one at a time: the first is
 * written, the rest are refused, and every payment that is settled buys the
 * plan and days it paid for.
 */
async function refuseSecondAdvance(
  trx: Transaction<Database>,
  accountId: string,
  plan: PaidPlan,
  authorizationKey: string,
  now: Date,
): Promise<void> {
  const account = await lockAccount(trx, accountId);
  if (planEffect(account, plan, now) !== "queued") return;
  if (account.nextPlanDays !== null) {
    throw new ServiceError(
      "conflict",
      `a paid change to ${planLabel(account.nextPlan ?? "free")} already waits for the end of this period`,
    );
  }
  const settling = await trx
    .selectFrom("billing_payments")
    .select("plan")
    .where("account_id", "=", accountId)
    .where("kind", "=", "plan")
    .where("status", "=", "pending")
    // The same payment presented twice at once is answered from its row.
    .where("authorization_key", "!=", authorizationKey)
    .execute();
  const inFlight = settling.find(
    (r) => isPaidPlan(r.plan) && planEffect(account, r.plan, now) === "queued",
  );
  if (inFlight) {
    throw new ServiceError(
      "conflict",
      `a payment for ${planLabel(planNamed(inFlight.plan!))} after this period is being settled: one plan is paid in advance at a time; try again once it is settled`,
    );
  }
}

function insertPending(
  trx: Transaction<Database>,
  values: Insertable<BillingPaymentsTable>,
  accountId: string,
) {
  return trx
    .insertInto("billing_payments")
    .values(values)
    .onConflict((oc) =>
      oc
        .column("authorization_key")
        .doUpdateSet((eb) => ({
          kind: eb.ref("excluded.kind"),
          plan: eb.ref("excluded.plan"),
          amount_micro_usd: eb.ref("excluded.amount_micro_usd"),
          status: "pending",
          source: eb.ref("excluded.source"),
          period_start: eb.ref("excluded.period_start"),
          period_end: eb.ref("excluded.period_end"),
          error: null,
          created_at: sql<Date>`now()`,
        }))
        .where("billing_payments.status", "=", "failed")
        .where("billing_payments.account_id", "=", accountId),
    )
    .returningAll()
    .executeTakeFirst();
}

export function findPayment(
  db: Db,
  authorizationKey: string,
): Promise<BillingPaymentRow | undefined> {
  return db
    .selectFrom("billing_payments")
    .selectAll()
    .where("authorization_key", "=", authorizationKey)
    .executeTakeFirst();
}

/** What the service's own record of a billing payment's settlement says. */
export type SettlementState =
  | { state: "succeeded"; transaction: string; payer: string | null }
  | { state: "pending" }
  | { state: "none" };

export async function settlementOf(db: Db, authorizationKey: string): Promise<SettlementState> {
  const rows = await db
    .selectFrom("settlements")
    .select(["status", "transaction", "payer"])
    .where("account_id", "=", BILLING_ACCOUNT_ID)
    .where("authorization_key", "=", authorizationKey)
    .execute();
  const won = rows.find((r) => r.status === "succeeded" && r.transaction);
  if (won) return { state: "succeeded", transaction: won.transaction!, payer: won.payer };
  if (rows.some((r) => r.status === "pending")) return { state: "pending" };
  return { state: "none" };
}

/** A payment whose settle moved nothing: it changes nothing. */
export async function failPayment(db: Db, id: string, error: string): Promise<void> {
  await db
    .updateTable("billing_payments")
    .set({ status: "failed", error: error.slice(0, 500) })
    .where("id", "=", id)
    .where("status", "=", "pending")
    .execute();
}

export interface Applied {
  /** False when the row was already applied (or failed): nothing changed now. */
  applied: boolean;
  row: BillingPaymentRow;
}

/**
 * Applies a settled payment, once: the row becomes `paid` and the account
 * changes, in one transaction with the payment's webhook events. The effect
 * is decided on the locked account row, so two payments of one account
 * applied at once (a renewal and an upgrade) each get their period.
 */
export async function applyPayment(
  db: Db,
  id: string,
  settled: { transaction: string; payer: string | null },
  settings: { paygGraceMicroUsd: number },
  now: Date = new Date(),
): Promise<Applied> {
  return db.transaction().execute(async (trx) => {
    const row = await trx
      .updateTable("billing_payments")
      .set({
        status: "paid",
        error: null,
        transaction: settled.transaction,
        payer: sql<string | null>`coalesce(${settled.payer?.toLowerCase() ?? null}, payer)`,
        paid_at: now,
        settlement_id: sql<string | null>`(select s.id from settlements s
          where s.account_id = ${BILLING_ACCOUNT_ID}
            and s.authorization_key = billing_payments.authorization_key
            and s.status = 'succeeded' limit 1)`,
      })
      .where("id", "=", id)
      // A failed row too: the sweep may have given up on a request that was
      // still settling, and money that arrived is applied whatever the row said.
      .where("status", "in", ["pending", "failed"])
      .returningAll()
      .executeTakeFirst();
    if (!row) {
      const current = await trx
        .selectFrom("billing_payments")
        .selectAll()
        .where("id", "=", id)
        .executeTakeFirstOrThrow();
      return { applied: false, row: current };
    }
    const paid = await applyToAccount(trx, row, settings.paygGraceMicroUsd, now);
    return { applied: true, row: paid };
  });
}

async function lockAccount(trx: Transaction<Database>, accountId: string) {
  const row = await trx
    .selectFrom("accounts")
    .select([...ACCOUNT_BILLING_COLUMNS])
    .where("id", "=", accountId)
    .forUpdate()
    .executeTakeFirstOrThrow();
  return accountBillingOf(row);
}

async function applyToAccount(
  trx: Transaction<Database>,
  row: BillingPaymentRow,
  graceMicroUsd: number,
  now: Date,
): Promise<BillingPaymentRow> {
  const account = await lockAccount(trx, row.account_id);
  const amount = BigInt(row.amount_micro_usd);
  const received = {
    paymentId: row.id,
    kind: row.kind,
    amountMicroUsd: amount.toString(),
    amountUsd: usdOf(amount),
    network: row.network,
    transaction: row.transaction,
    payer: row.payer,
  };
  if (row.kind === "top_up") {
    const balance = account.balanceMicroUsd + amount;
    const lifts =
      account.suspended &&
      account.suspendedBy === BILLING_SUSPENSION &&
      balance >= -BigInt(graceMicroUsd);
    await trx
      .updateTable("accounts")
      .set({
        balance_micro_usd: sql<string>`balance_micro_usd + ${amount.toString()}::bigint`,
        ...(lifts ? { suspended_at: null, suspended_by: null, suspended_reason: null } : {}),
      })
      .where("id", "=", row.account_id)
      .execute();
    await recordBillingEvent(
      trx,
      row.account_id,
      "billing.payment_received",
      { ...received, balanceMicroUsd: balance.toString(), balanceUsd: usdOf(balance) },
      now,
    );
    // Pay-as-you-go's paid limits come with a positive balance: every
    // replica's key cache holds the plan its rate limit applies.
    if (account.plan === "payg" && account.balanceMicroUsd <= 0n && balance > 0n) {
      await announceChange(trx, API_KEYS_CHANGED);
    }
    if (lifts) {
      await recordBillingEvent(
        trx,
        row.account_id,
        "billing.suspension_lifted",
        { balanceMicroUsd: balance.toString(), balanceUsd: usdOf(balance), paymentId: row.id },
        now,
      );
    }
    return row;
  }
  const plan = row.plan;
  if (!isPaidPlan(plan)) throw new Error(`billing payment ${row.id} names no paid plan`);
  const effect = planEffect(account, plan, now);
  const { start, end } = periodOf(account, effect, now);
  if (effect === "queued" && account.nextPlanDays !== null && account.nextPlan !== plan) {
    // Pricing takes one plan paid in advance at a time (on the locked row),
    // so this is only a payment whose row was given up as never settled and
    // then settled after another advance was bought. Only one plan can wait,
    // and giving either plan the other's days would sell days nobody paid
    // for: the money goes to the prepaid balance instead, and says so.
    return creditInstead(trx, row, received, now);
  }
  if (effect === "queued") {
    // Two payments for the same lower plan both waiting: their days add up.
    const days = daysBetween(start, end);
    await trx
      .updateTable("accounts")
      .set(
        account.nextPlanDays !== null
          ? { next_plan_days: sql<number>`next_plan_days + ${days}` }
          : { next_plan: plan, next_plan_days: days },
      )
      .where("id", "=", row.account_id)
      .execute();
  } else {
    // A payment for a plan now or a renewal keeps the account on a paid
    // plan: an unpaid change chosen for the end of the period is dropped
    // (paying says otherwise); a paid one still waits for its turn.
    await trx
      .updateTable("accounts")
      .set({
        plan,
        paid_until: end,
        expiry_notice_for: null,
        ...(account.nextPlanDays === null ? { next_plan: null } : {}),
      })
      .where("id", "=", row.account_id)
      .execute();
  }
  const updated = await trx
    .updateTable("billing_payments")
    .set({ period_start: start, period_end: end })
    .where("id", "=", row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  const period = { plan, periodStart: start.toISOString(), periodEnd: end.toISOString() };
  await recordBillingEvent(
    trx,
    row.account_id,
    "billing.payment_received",
    { ...received, ...period, effect },
    now,
  );
  if (effect === "renew") {
    await recordBillingEvent(
      trx,
      row.account_id,
      "billing.plan_renewed",
      { ...period, paidUntil: end.toISOString(), paymentId: row.id },
      now,
    );
  }
  // Every replica's key cache holds the plan for the per-key rate limit.
  if (effect !== "queued" && account.plan !== plan) await announceChange(trx, API_KEYS_CHANGED);
  return updated;
}

/** A plan payment that cannot buy its plan: its amount becomes prepaid balance. */
async function creditInstead(
  trx: Transaction<Database>,
  row: BillingPaymentRow,
  received: Record<string, unknown>,
  now: Date,
): Promise<BillingPaymentRow> {
  const credited = await trx
    .updateTable("accounts")
    .set({
      balance_micro_usd: sql<string>`balance_micro_usd + ${row.amount_micro_usd}::bigint`,
    })
    .where("id", "=", row.account_id)
    .returning("balance_micro_usd")
    .executeTakeFirstOrThrow();
  const updated = await trx
    .updateTable("billing_payments")
    .set({ period_start: null, period_end: null })
    .where("id", "=", row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  const balance = BigInt(credited.balance_micro_usd);
  await recordBillingEvent(
    trx,
    row.account_id,
    "billing.payment_received",
    {
      ...received,
      effect: "credited",
      balanceMicroUsd: balance.toString(),
      balanceUsd: usdOf(balance),
    },
    now,
  );
  return updated;
}

const daysBetween = (a: Date, b: Date) => Math.round((b.getTime() - a.getTime()) / 86_400_000);

/**
 * The operator sets a plan by hand (a comp), recorded in the account's
 * billing history as such, in the transaction that sets it. `days`: how long
 * it lasts before falling back to Free; absent, it does not run out. Refused
 * while a plan the customer paid for in advance waits for its turn: the comp
 * would drop it, and the money with it.
 */
export async function compPlan(
  db: Db,
  accountId: string,
  plan: PlanName,
  opts: { days?: number; note?: string } = {},
  now: Date = new Date(),
): Promise<BillingPaymentRow> {
  return db.transaction().execute(async (trx) => {
    const account = await lockAccount(trx, accountId);
    if (account.nextPlanDays !== null) {
      throw new ServiceError(
        "conflict",
        `the account has paid in advance for ${account.nextPlanDays} days of ${planLabel(account.nextPlan ?? "free")}, waiting for the end of its current period; a comp now would drop them: comp the account once that plan has started`,
      );
    }
    const end = opts.days === undefined ? null : periodEndOf(now, opts.days);
    await trx
      .updateTable("accounts")
      .set({
        plan,
        paid_until: end,
        next_plan: null,
        next_plan_days: null,
        expiry_notice_for: null,
      })
      .where("id", "=", accountId)
      .execute();
    const row = await trx
      .insertInto("billing_payments")
      .values({
        id: randomUUID(),
        account_id: accountId,
        kind: "comp",
        plan,
        amount_micro_usd: 0,
        status: "paid",
        source: "operator",
        period_start: now,
        period_end: end,
        note: opts.note?.trim() || null,
        paid_at: now,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    await announceChange(trx, API_KEYS_CHANGED);
    return row;
  });
}

/** The first instant of the next calendar month in UTC: when pay-as-you-go's month ends. */
export function nextMonthStart(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
}

/**
 * A person's change that needs no payment: to pay-as-you-go from Free (at
 * once), to Free or pay-as-you-go at the end of a paid period, to Free at
 * the end of pay-as-you-go's month. Going down never takes effect before
 * what was paid for (or charged) runs out, and nothing is refunded.
 */
export async function choosePlanChange(
  db: Db,
  accountId: string,
  to: "free" | "payg",
  now: Date = new Date(),
): Promise<{ effective: Date | null }> {
  return db.transaction().execute(async (trx) => {
    const account = await lockAccount(trx, accountId);
    const refuse = (message: string) => {
      throw new ServiceError("conflict", message);
    };
    if (account.plan === to) refuse(`the account is already on ${planLabel(to)}`);
    if (account.nextPlanDays !== null) {
      refuse(
        `a paid change to ${planLabel(account.nextPlan ?? "free")} already waits for the end of this period`,
      );
    }
    if (account.plan === "free") {
      // Free to pay-as-you-go costs nothing until usage passes the free 1,000.
      await trx
        .updateTable("accounts")
        .set({ plan: "payg", paid_until: null, next_plan: null })
        .where("id", "=", accountId)
        .execute();
      await announceChange(trx, API_KEYS_CHANGED);
      return { effective: now };
    }
    if (account.plan === "payg") {
      // This month's charges are drawn as they accrue; the month ends first.
      const at = nextMonthStart(now);
      await trx
        .updateTable("accounts")
        .set({ next_plan: to, paid_until: at })
        .where("id", "=", accountId)
        .execute();
      return { effective: at };
    }
    if (account.paidUntil === null) {
      refuse(
        `the account's ${planLabel(account.plan)} plan was set by the operator with no end date: ask the operator to change it`,
      );
    }
    await trx.updateTable("accounts").set({ next_plan: to }).where("id", "=", accountId).execute();
    return { effective: account.paidUntil };
  });
}

/** Drops a change chosen for the end of the period that was not paid for. */
export async function cancelPlanChange(db: Db, accountId: string): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const account = await lockAccount(trx, accountId);
    if (account.nextPlan === null) {
      throw new ServiceError("conflict", "no change is scheduled");
    }
    if (account.nextPlanDays !== null) {
      throw new ServiceError(
        "conflict",
        "this change was paid for and cannot be cancelled (nothing is refunded automatically)",
      );
    }
    await trx
      .updateTable("accounts")
      .set({
        next_plan: null,
        // Pay-as-you-go has no period of its own: its end was the change's.
        ...(account.plan === "payg" ? { paid_until: null } : {}),
      })
      .where("id", "=", accountId)
      .execute();
  });
}

export interface SweepResult {
  noticed: number;
  expired: number;
  resolved: number;
}

/** How long before the end of a paid period its "expiring" notice is written. */
const EXPIRY_NOTICE_MS = 7 * 86_400_000;
/** A pending payment with no settlement after this long was never settled. */
const ABANDONED_AFTER_MS = 5 * 60_000;

/**
 * What time does to plans, safe to run on every replica at once (each
 * change is a guarded update, its event written in its transaction):
 * - a paid period ending within 7 days, with nothing paid after it, gets
 *   its `billing.plan_expiring` event, once per period end;
 * - a period that ended moves the account to the change chosen for it (a
 *   paid lower plan for its days, Free or pay-as-you-go), or to Free;
 * - a payment left pending by a request that died is applied once its
 *   settlement succeeded, or failed once it is clear nothing was settled.
 */
export async function sweepBilling(
  db: Db,
  settings: { paygGraceMicroUsd: number },
  now: Date = new Date(),
): Promise<SweepResult> {
  const noticed = await db.transaction().execute(async (trx) => {
    const due = await sql<{ id: string; plan: string; paid_until: Date; next_plan: string | null }>`
      update accounts set expiry_notice_for = paid_until
      where plan in ('starter', 'pro', 'max') and paid_until > ${now}
        and paid_until <= ${new Date(now.getTime() + EXPIRY_NOTICE_MS)}
        and next_plan_days is null
        and expiry_notice_for is distinct from paid_until
      returning id, plan, paid_until, next_plan`.execute(trx);
    for (const a of due.rows) {
      await recordBillingEvent(
        trx,
        a.id,
        "billing.plan_expiring",
        {
          plan: a.plan,
          paidUntil: new Date(a.paid_until).toISOString(),
          fallsBackTo: a.next_plan ?? "free",
          renew:
            "pay for the same plan again (POST /api/billing/upgrade, or the dashboard's Plans tab) to extend it by 30 days",
        },
        now,
      );
    }
    return due.rows.length;
  });
  const expired = await db.transaction().execute(async (trx) => {
    const moved = await sql<{ id: string }>`
      with due as (
        select id from accounts where paid_until <= ${now}
        order by id limit 500 for update skip locked
      )
      update accounts a set
        plan = coalesce(a.next_plan, 'free'),
        paid_until = case when a.next_plan_days is not null
          then a.paid_until + make_interval(days => a.next_plan_days) else null end,
        next_plan = null,
        next_plan_days = null,
        expiry_notice_for = null
      from due where a.id = due.id and a.paid_until <= ${now}
      returning a.id`.execute(trx);
    if (moved.rows.length > 0) await announceChange(trx, API_KEYS_CHANGED);
    return moved.rows.length;
  });
  let resolved = 0;
  const pending = await db
    .selectFrom("billing_payments")
    .select(["id", "authorization_key", "created_at"])
    .where("status", "=", "pending")
    .where("created_at", "<", new Date(now.getTime() - 30_000))
    .orderBy("created_at")
    .limit(100)
    .execute();
  for (const p of pending) {
    const settlement = await settlementOf(db, p.authorization_key!);
    if (settlement.state === "succeeded") {
      const done = await applyPayment(db, p.id, settlement, settings, now);
      if (done.applied) resolved++;
    } else if (
      settlement.state === "none" &&
      p.created_at.getTime() < now.getTime() - ABANDONED_AFTER_MS
    ) {
      await failPayment(db, p.id, "the payment was never settled");
      resolved++;
    }
  }
  return { noticed, expired, resolved };
}

export interface BillingHistoryEntry {
  id: string;
  date: string;
  kind: "plan" | "top_up" | "comp";
  plan: string | null;
  amountMicroUsd: string;
  amountUsd: string;
  network: string | null;
  transaction: string | null;
  explorerUrl: string | null;
  payer: string | null;
  periodStart: string | null;
  periodEnd: string | null;
  source: string;
  status: string;
  note: string | null;
}

/** The account's billing payments and comps, newest first (failed attempts left out). */
export async function listBillingHistory(
  db: Db,
  accountId: string,
  explorerUrl: (network: string, transaction: string | null) => string | null,
  limit = 500,
): Promise<BillingHistoryEntry[]> {
  const rows = await db
    .selectFrom("billing_payments")
    .selectAll()
    .where("account_id", "=", accountId)
    .where("status", "!=", "failed")
    .orderBy("created_at", "desc")
    .limit(limit)
    .execute();
  const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);
  return rows.map((r) => ({
    id: r.id,
    date: (r.paid_at ?? r.created_at).toISOString(),
    kind: r.kind,
    plan: r.plan,
    amountMicroUsd: String(r.amount_micro_usd),
    amountUsd: usdOf(r.amount_micro_usd),
    network: r.network,
    transaction: r.transaction,
    explorerUrl: r.network && r.transaction ? explorerUrl(r.network, r.transaction) : null,
    payer: r.payer,
    periodStart: iso(r.period_start),
    periodEnd: iso(r.period_end),
    source: r.source,
    status: r.status,
    note: r.note,
  }));
}

const CSV_COLUMNS: readonly (keyof BillingHistoryEntry)[] = [
  "date",
  "kind",
  "plan",
  "amountUsd",
  "network",
  "transaction",
  "explorerUrl",
  "payer",
  "periodStart",
  "periodEnd",
  "source",
  "status",
  "note",
];

/**
 * One CSV field, quoted when it holds a separator, quote or line break; a
 * leading = + - @ is defused so a spreadsheet does not run it as a formula.
 */
function csvField(v: unknown): string {
  if (v === null || v === undefined) return "";
  let s = String(v);
  if (/^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function billingHistoryCsv(entries: readonly BillingHistoryEntry[]): string {
  return [
    `${CSV_COLUMNS.join(",")}\r\n`,
    ...entries.map((e) => CSV_COLUMNS.map((c) => csvField(e[c])).join(",") + "\r\n"),
  ].join("");
}
