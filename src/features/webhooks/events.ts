/**
 * Settlement webhook events and their outbox writes.
 *
 * An event is written in the same statement or transaction that finishes
 * its settlement row (transactional outbox), so it exists exactly when its
 * outcome is committed. Nothing is written for an account without an
 * endpoint, for an event type its endpoint did not choose (0013), or for a
 * row that is `pending` or `not_attempted` (an outage is nobody's news).
 *
 * The event's body is built by the database from the row itself
 * (`settlementEventRows`), the one definition every writer uses: a settle's
 * outcome writes its event inside the statement that moves its row, and the
 * other writers (the reconciler, a revoked success) insert from the rows
 * their transaction just moved.
 */
import { sql, type RawBuilder, type Transaction } from "kysely";
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

/** The body of a settlement event, as signed and delivered. */
export interface SettlementEvent {
  type: SettlementEventType;
  id: string;
  createdAt: string;
  data: SettlementEventData;
}

/**
 * What a row's event needs beyond the row: its account's endpoint's chosen
 * event types (null: no endpoint) and its key's name. A writer that moves
 * rows reads them in the same RETURNING.
 */
export interface EventContext {
  endpoint_events: string[] | null;
  api_key_name: string | null;
}

/** A timestamp as JavaScript's `toISOString` writes it (UTC, milliseconds). */
const iso = (column: RawBuilder<unknown>) =>
  sql`to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * The outbox rows due for the settlement rows of `source` (a CTE or
 * subquery alias whose columns are the settlements table's plus
 * `EventContext`'s): `(id, account_id, type, settlement_id, payload)`, ready
 * for an `insert into webhook_events`. Only final rows whose endpoint chose
 * their event's type.
 */
export function settlementEventRows(source: string): RawBuilder<unknown> {
  const r = (column: string) => sql.ref(`r.${column}`);
  const type = sql`case when ${r("status")} = 'succeeded'
    then 'settlement.succeeded' else 'settlement.failed' end`;
  return sql`
    select e.event_id, r.account_id, e.type, r.id,
      jsonb_build_object(
        'type', e.type,
        'id', e.event_id,
        'createdAt', ${iso(sql`clock_timestamp()`)},
        'data', jsonb_build_object(
          'id', r.id,
          'network', r.network,
          'scheme', r.scheme,
          'payer', r.payer,
          'payTo', r.pay_to,
          'asset', r.asset,
          'amount', r.amount::text,
          'transaction', r.transaction,
          'status', r.status,
          'errorReason', r.error_reason,
          'errorMessage', r.error_message,
          'apiKeyName', r.api_key_name,
          'startedAt', ${iso(r("started_at"))},
          'finishedAt', ${iso(r("finished_at"))}
        )
      )::text
    from ${sql.table(source)} r
    cross join lateral (
      select ${type} as type,
        'evt_' || replace(gen_random_uuid()::text, '-', '') as event_id
    ) e
    where r.status in ('succeeded', 'failed')
      and e.type = any(r.endpoint_events)`;
}

/**
 * Writes the outbox rows for settlements just finished together, in the
 * caller's transaction, in one statement however many rows: their accounts'
 * endpoints and their keys' names are read in it.
 */
export async function recordSettlementEvents(
  trx: Transaction<Database>,
  rows: readonly SettlementOutcomeRow[],
): Promise<void> {
  const ids = rows
    .filter((r) => r.status === "succeeded" || r.status === "failed")
    .map((r) => r.id);
  if (ids.length === 0) return;
  await sql`
    with finished as (
      select s.*,
        (select w.events from webhook_endpoints w where w.account_id = s.account_id)
          as endpoint_events,
        (select k.name from api_keys k where k.id = s.api_key_id) as api_key_name
      from settlements s where s.id = any(${ids}::uuid[])
    )
    insert into webhook_events (id, account_id, type, settlement_id, payload)
    ${settlementEventRows("finished")}`.execute(trx);
}
