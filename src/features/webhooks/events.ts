/**
 * Settlement webhook events and their outbox writes.
 *
 * `recordSettlementEvents` runs inside the transaction that finishes
 * settlement rows (one, or several committed together), so an event exists
 * exactly when its outcome is committed (transactional outbox). It writes
 * nothing for an account without an endpoint, and nothing for a row that is
 * `pending` or `not_attempted`.
 */
import { randomUUID } from "node:crypto";
import type { Transaction } from "kysely";
import type { Database, SettlementOutcomeRow } from "../../storage/schema.js";

type SettlementEventType = "settlement.succeeded" | "settlement.failed";

interface SettlementEventData {
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

function settlementEvent(
  row: SettlementOutcomeRow,
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
 * Writes the outbox rows for settlements just finished together, in the
 * caller's transaction: one read of their accounts' endpoints, one of their
 * keys' names and one insert, however many rows. Returns each row's event
 * id, or undefined where none was due.
 */
export async function recordSettlementEvents(
  trx: Transaction<Database>,
  rows: readonly (SettlementOutcomeRow & Partial<EventContext>)[],
): Promise<(string | undefined)[]> {
  // Only outcomes are events: a pending row has none yet, and a settlement
  // that was never attempted (an outage) is nobody's news.
  const outcomes = rows.filter((r) => r.status === "succeeded" || r.status === "failed");
  if (outcomes.length === 0) return rows.map(() => undefined);
  const context = outcomes.every(hasEventContext)
    ? (r: SettlementOutcomeRow & Partial<EventContext>) => r as EventContext
    : await readEventContext(trx, outcomes);
  // The endpoint chose its events (0013); an unchosen type is not written.
  const due = outcomes.filter((r) => context(r).endpoint_events?.includes(eventType(r)));
  if (due.length === 0) return rows.map(() => undefined);
  const events = new Map(due.map((r) => [r, settlementEvent(r, context(r).api_key_name)]));
  await trx
    .insertInto("webhook_events")
    .values(
      [...events].map(([row, event]) => ({
        id: event.id,
        account_id: row.account_id,
        type: event.type,
        settlement_id: row.id,
        payload: JSON.stringify(event),
      })),
    )
    .execute();
  return rows.map((r) => events.get(r)?.id);
}

/**
 * What a row's event needs beyond the row: its account's endpoint's chosen
 * event types (null: no endpoint) and its key's name. A writer that can read
 * them with the rows (a RETURNING) passes them along and saves two reads.
 */
export interface EventContext {
  endpoint_events: string[] | null;
  api_key_name: string | null;
}

const hasEventContext = (r: Partial<EventContext>): boolean =>
  r.endpoint_events !== undefined && r.api_key_name !== undefined;

/** The event context of rows read without it: one read of endpoints, one of key names. */
async function readEventContext(
  trx: Transaction<Database>,
  rows: readonly SettlementOutcomeRow[],
): Promise<(r: SettlementOutcomeRow) => EventContext> {
  const endpoints = await trx
    .selectFrom("webhook_endpoints")
    .select(["account_id", "events"])
    .where("account_id", "in", unique(rows.map((r) => r.account_id)))
    .execute();
  const chosen = new Map(endpoints.map((e) => [e.account_id, e.events]));
  const withEndpoint = rows.filter((r) => chosen.has(r.account_id));
  const keys =
    withEndpoint.length === 0
      ? []
      : await trx
          .selectFrom("api_keys")
          .select(["id", "name"])
          .where("id", "in", unique(withEndpoint.map((r) => r.api_key_id)))
          .execute();
  const keyName = new Map(keys.map((k) => [k.id, k.name]));
  return (r) => ({
    endpoint_events: chosen.get(r.account_id) ?? null,
    api_key_name: keyName.get(r.api_key_id) ?? null,
  });
}

const eventType = (row: SettlementOutcomeRow): SettlementEventType =>
  row.status === "succeeded" ? "settlement.succeeded" : "settlement.failed";

const unique = <T>(values: readonly T[]): T[] => [...new Set(values)];
