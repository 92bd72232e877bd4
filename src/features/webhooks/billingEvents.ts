/**
 * Billing webhook events (features/billing): what happened to the account's
 * plan and pay-as-you-go balance, through the same outbox, signing and
 * in-order delivery as settlement events.
 *
 * `recordBillingEvent` runs inside the transaction that makes the change
 * (a payment applied, a charge that suspends, a plan that runs out), so an
 * event exists exactly when its change is committed, and an account's
 * events are delivered in the order their changes were made. Nothing is
 * written for an account without an endpoint, or whose endpoint did not
 * choose the type.
 */
import { randomUUID } from "node:crypto";
import { sql, type Transaction } from "kysely";
import type { Database } from "../../storage/schema.js";

export const BILLING_EVENT_TYPES = [
  /** A billing payment (a plan or a top-up) was settled and applied. */
  "billing.payment_received",
  /** A payment for the plan the account is on extended its paid period. */
  "billing.plan_renewed",
  /** The plan's paid period ends in 7 days and no renewal is paid for. */
  "billing.plan_expiring",
  /** Pay-as-you-go: a charge took the balance past the grace; /settle now answers 402. */
  "billing.account_suspended",
  /** Pay-as-you-go: a top-up covered the balance; /settle works again. */
  "billing.suspension_lifted",
] as const;
export type BillingEventType = (typeof BILLING_EVENT_TYPES)[number];

/**
 * Writes one billing event for `accountId` in the caller's transaction, when
 * its endpoint chose the type, in one statement. Returns the event id, or
 * undefined when none was due.
 */
export async function recordBillingEvent(
  trx: Transaction<Database>,
  accountId: string,
  type: BillingEventType,
  data: Record<string, unknown>,
  now: Date = new Date(),
): Promise<string | undefined> {
  const id = `evt_${randomUUID().replace(/-/g, "")}`;
  const payload = JSON.stringify({
    type,
    id,
    createdAt: now.toISOString(),
    data: { accountId, ...data },
  });
  const written = await sql<{ id: string }>`
    insert into webhook_events (id, account_id, type, settlement_id, payload)
    select ${id}, ${accountId}, ${type}, null, ${payload}
    where exists (
      select 1 from webhook_endpoints e
      where e.account_id = ${accountId} and ${type} = any(e.events))
    returning id`.execute(trx);
  return written.rows[0]?.id;
}
