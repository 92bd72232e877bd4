/**
 * Settlement webhook events and their outbox writes.
 *
 * `recordSettlementEvent` runs inside the transaction that finishes a
 * settlement row, so an event exists exactly when the outcome is committed
 * (transactional outbox). It writes nothing for an account without an
 * endpoint, and nothing for a row that is `pending` or `not_attempted`.
 */
import { randomUUID } from "node:crypto";
import type { Transaction } from "kysely";
import type { Database, SettlementRow } from "../../storage/schema.js";

export type SettlementEventType = "settlement.succeeded" | "settlement.failed";

export interface SettlementEventData {
  id: string;
  network: string;
  scheme: string;
  payer: string | null;
  payTo: string;
  asset: string;
  amount: string;
  transaction: string | null;
  status: "succeeded" | "failed";
  errorReason: string | null;
  errorMessage: string | null;
  apiKeyName: string | null;
  startedAt: string;
  finishedAt: string | null;
}

export interface SettlementEvent {
  type: SettlementEventType;
  id: string;
  createdAt: string;
  data: SettlementEventData;
}

const iso = (d: Date | string | null): string | null =>
  d === null ? null : (d instanceof Date ? d : new Date(d)).toISOString();

export function settlementEvent(
  row: SettlementRow,
  apiKeyName: string | null,
  now = new Date(),
): SettlementEvent {
  if (row.status === "pending" || row.status === "not_attempted") {
    throw new Error(`a ${row.status} settlement has no event`);
  }
  return {
    type: row.status === "succeeded" ? "settlement.succeeded" : "settlement.failed",
    id: `evt_${randomUUID().replace(/-/g, "")}`,
    createdAt: now.toISOString(),
    data: {
      id: row.id,
      network: row.network,
      scheme: row.scheme,
      payer: row.payer,
      payTo: row.pay_to,
      asset: row.asset,
      amount: String(row.amount),
      transaction: row.transaction,
      status: row.status,
      errorReason: row.error_reason,
      errorMessage: row.error_message,
      apiKeyName,
      startedAt: iso(row.started_at)!,
      finishedAt: iso(row.finished_at),
    },
  };
}

/**
 * Writes the outbox row for a just-finished settlement, in the caller's
 * transaction. Returns the event id, or undefined when none was due.
 */
export async function recordSettlementEvent(
  trx: Transaction<Database>,
  row: SettlementRow,
): Promise<string | undefined> {
  // Only outcomes are events: a pending row has none yet, and a settlement
  // that was never attempted (an outage) is nobody's news.
  if (row.status === "pending" || row.status === "not_attempted") return undefined;
  const endpoint = await trx
    .selectFrom("webhook_endpoints")
    .select(["account_id", "events"])
    .where("account_id", "=", row.account_id)
    .executeTakeFirst();
  if (!endpoint) return undefined;
  // The endpoint chose its events (0013); an unchosen type is not written.
  const type = row.status === "succeeded" ? "settlement.succeeded" : "settlement.failed";
  if (!endpoint.events.includes(type)) return undefined;
  const key = await trx
    .selectFrom("api_keys")
    .select("name")
    .where("id", "=", row.api_key_id)
    .executeTakeFirst();
  const event = settlementEvent(row, key?.name ?? null);
  await trx
    .insertInto("webhook_events")
    .values({
      id: event.id,
      account_id: row.account_id,
      type: event.type,
      settlement_id: row.id,
      payload: JSON.stringify(event),
    })
    .execute();
  return event.id;
}
