/**
 * The settle path's writes in set form: each takes the rows of many
 * settlements and costs one statement, so a group-commit flush of N
 * settlements costs what one settlement used to. The recorder decides what
 * to write and when; these only write it.
 *
 * Every statement here is atomic (a single statement, or run in the
 * caller's transaction), which is what lets a failed flush be split and
 * retried without writing anything twice.
 */
import { sql, type Kysely, type RawBuilder, type Transaction } from "kysely";
import type { JournalEntry } from "../../chains/ports.js";
import type { FinishedTransaction } from "../../chains/settlementScope.js";
import type { Database, NewSettlement, SettlementOutcomeRow } from "../../storage/schema.js";
import type { EventContext } from "../webhooks/events.js";

/** A transition of a pending row: the outcome's columns (null = left as it is). */
export interface RowTransition {
  id: string;
  status: "succeeded" | "failed" | "pending" | "not_attempted";
  /** Null keeps the row's own (set by the journal when the first transaction was sent). */
  transaction: string | null;
  errorReason: string | null;
  errorMessage: string | null;
  /** Null keeps the row's own. */
  payer: string | null;
  /** The amount a success named (null: the requirements' own). */
  settledAmount: string | null;
  /**
   * The request answered with this success, recorded as the payment's one
   * success answer (null: none is answered by this transition).
   */
  answeredTo: string | null;
  finishedAt: Date;
  durationMs: number;
}

/**
 * A final row's stored request without its signatures and signed
 * transactions (migration 0020): only a pending row may need them, to be
 * reconciled.
 */
export const REDACTED_REQUEST = sql<string>`case when s.request ? 'paymentPayload'
  then jsonb_set(s.request, '{paymentPayload}', redact_signed(s.request -> 'paymentPayload'))
  else s.request end`;

/**
 * The rows that hold their authorization: one at a time per key (migration
 * 0018). A success that moved nothing does not hold it.
 */
export const HOLDS_AUTHORIZATION = sql<boolean>`(status = 'pending' or (status = 'succeeded' and transaction is not null))`;

export interface SentTransaction {
  entry: JournalEntry;
  settlementId: string | undefined;
}

export type MinedTransaction = FinishedTransaction;

/**
 * Inserts intent rows; returns the ids actually written. A row whose
 * authorization already has a live record is skipped by the unique index
 * (also when the live record is another row of the same insert: the first
 * one listed wins), exactly as a lone insert would be.
 */
async function insertIntents(
  db: Kysely<Database>,
  rows: readonly NewSettlement[],
): Promise<Set<string>> {
  const inserted = await db
    .insertInto("settlements")
    .values([...rows])
    .onConflict((oc) =>
      // The predicate names the partial unique index it is arbitrated by.
      oc.column("authorization_key").where(HOLDS_AUTHORIZATION).doNothing(),
    )
    .returning("id")
    .execute();
  return new Set(inserted.map((r) => r.id));
}

/**
 * An intent row, and since when its payer's own on-chain failures refuse it
 * (cooling); without `coolingSince` the row is written as `insertIntents`
 * writes it.
 */
export interface CheckedIntent {
  row: NewSettlement;
  coolingSince?: Date | undefined;
  /** Its payment's key in the pending-settlement store, whose row is read with it. */
  pendingKey?: string | undefined;
  /** Its quota reservation is asked in the same statement (see `IntentReservations`). */
  reserve?: boolean | undefined;
}

/**
 * The quota's part of an intent statement (QuotaLedger.reservationPart):
 * CTEs that reserve what the relation named `asked` asks (one row an
 * account: `account_id`, `units`, `pending`, `networks`) and return, as
 * `reserved`, the accounts granted with their plan.
 */
export interface IntentReservations {
  reservationPart(asked: string): { ctes: RawBuilder<unknown>; month: string };
}

/** What a checked insert found and wrote. */
interface CheckedIntents {
  /** The ids written. */
  inserted: Set<string>;
  /** Each checked payer's latest own on-chain failure since the earliest `coolingSince`. */
  lastFailure: Map<string, Date>;
  /** The checked payers with a settlement that succeeded with a transaction on record. */
  known: Set<string>;
  /** The pending-settlement store's unexpired rows for the keys asked: key → transaction. */
  pending: Map<string, string>;
  /** The accounts whose written intents' reservations were granted: account → plan. */
  reserved: Map<string, string | null>;
  /** The month they were reserved in. */
  month: string | undefined;
}

// The columns an intent row is written with; the others keep their defaults.
const INTENT_COLUMNS = [
  "id",
  "account_id",
  "api_key_id",
  "network",
  "scheme",
  "payer",
  "pay_to",
  "asset",
  "amount",
  "payload_fingerprint",
  "status",
  "transaction",
  "error_reason",
  "error_message",
  "started_at",
  "finished_at",
  "duration_ms",
  "request",
  "units",
  "authorization_key",
] as const satisfies readonly (keyof NewSettlement)[];

/**
 * `insertIntents`, with the payer's history read in the same statement: a
 * row whose payer's own payment failed on-chain after its `coolingSince`
 * is not written (the payer is cooling), and the statement answers each
 * payer's latest such failure and whether it has a success on record (the
 * failed-fee budget's tiers). One statement where a read and then an
 * insert were two round trips; the reads see the table as it was before
 * the insert, which is what reading first saw.
 *
 * The pending-settlement store's rows for the intents' `pendingKey`s are
 * read in it too (a probe of its primary key each), so the mechanism's
 * look-up of a transaction an earlier attempt left pending is answered
 * without a round trip of its own.
 *
 * The rows go in as one JSON array, typed by the table's own row type
 * (`jsonb_populate_record`), so each keeps its own `coolingSince` beside
 * it, and in the order given: of two rows for one authorization, the first
 * listed wins, as in `insertIntents`.
 */
async function insertCheckedIntents(
  db: Kysely<Database>,
  intents: readonly CheckedIntent[],
  quota: IntentReservations | undefined,
): Promise<CheckedIntents> {
  const checked = intents.filter((i) => i.coolingSince !== undefined);
  const payers = [...new Set(checked.flatMap(({ row }) => (row.payer ? [row.payer] : [])))];
  // Nothing to cool (only pending-store keys asked): the cooling read finds nothing.
  const since =
    checked.length > 0
      ? new Date(Math.min(...checked.map((i) => i.coolingSince!.getTime())))
      : new Date();
  const pendingKeys = [...new Set(intents.flatMap((i) => (i.pendingKey ? [i.pendingKey] : [])))];
  const input = JSON.stringify(
    intents.map(({ row, coolingSince }) => ({
      ...row,
      // Stored as the document it is, not as a JSON string.
      request: typeof row.request === "string" ? JSON.parse(row.request) : row.request,
      cooling_since: coolingSince,
    })),
  );
  // The reservations asked, of the rows this statement writes: an account's
  // together, its new rows counted among its settles in flight (the
  // statement's snapshot does not show them).
  const reserving = quota ? intents.filter((i) => i.reserve).map((i) => i.row.id) : [];
  const part = reserving.length > 0 ? quota!.reservationPart("asked") : undefined;
  const reservation = part
    ? sql`, asked as (
        select account_id, sum(units)::int as units, count(*)::int as pending,
          array_agg(distinct network) as networks
        from inserted where id = any(${reserving}::uuid[]) group by account_id
      ), ${part.ctes}`
    : sql``;
  const reservedRows = part
    ? sql`union all select 'reserved', account_id::text, null, plan from reserved`
    : sql``;
  const columns = sql.join(INTENT_COLUMNS.map((c) => sql.ref(c)));
  const values = sql.join(INTENT_COLUMNS.map((c) => sql.ref(`v.${c}`)));
  const { rows } = await sql<{
    kind: "inserted" | "cooling" | "known" | "pending" | "reserved";
    value: string;
    at: Date | string | null;
    tx: string | null;
  }>`
    with input as (
      select i.j, i.ord from jsonb_array_elements(${input}::jsonb) with ordinality as i(j, ord)
    ), cooling as (
      select payer, max(finished_at) as last from settlements
      where payer = any(${payers}::text[]) and status = 'failed' and transaction is not null
        and failure_cause = 'payer' and finished_at > ${since}
      group by payer
    ), known as (
      -- One probe of the partial index of successes per payer (see settlementReads.ts).
      select p.payer from unnest(${payers}::text[]) as p(payer)
      where exists (select 1 from settlements s where s.payer = p.payer
        and s.status = 'succeeded' and s.transaction is not null)
    ), pending as (
      select key, tx_hash from pending_settlements
      where key = any(${pendingKeys}::text[]) and expires_at > ${new Date()}
    ), inserted as (
      insert into settlements (${columns})
      select ${values}
      from input i cross join lateral jsonb_populate_record(null::settlements, i.j) as v
      where not exists (select 1 from cooling c
        where c.payer = v.payer and c.last > (i.j ->> 'cooling_since')::timestamptz)
      order by i.ord
      on conflict (authorization_key) where ${HOLDS_AUTHORIZATION} do nothing
      returning id, account_id, network, units
    )${reservation}
    select 'inserted' as kind, id::text as value, null::timestamptz as at, null::text as tx
    from inserted
    union all select 'cooling', payer, last, null from cooling
    union all select 'known', payer, null, null from known
    union all select 'pending', key, null, tx_hash from pending
    ${reservedRows}`.execute(db);
  const found: CheckedIntents = {
    inserted: new Set(),
    lastFailure: new Map(),
    known: new Set(),
    pending: new Map(),
    reserved: new Map(),
    month: part?.month,
  };
  for (const r of rows) {
    if (r.kind === "inserted") found.inserted.add(r.value);
    else if (r.kind === "known") found.known.add(r.value);
    else if (r.kind === "pending") found.pending.set(r.value, r.tx!);
    else if (r.kind === "reserved") found.reserved.set(r.value, r.tx);
    else if (r.at !== null) found.lastFailure.set(r.value, new Date(r.at));
  }
  return found;
}

/** What writing one intent found. */
export interface IntentWritten {
  /** Whether its row was written. */
  written: boolean;
  /** When its payer's latest own on-chain failure ended, if after the `coolingSince` asked. */
  payerFailedAt?: Date | undefined;
  /** Whether its payer has a settlement that succeeded on record (undefined: not asked, or no payer). */
  payerKnown?: boolean | undefined;
  /** Its `pendingKey`'s row in the pending-settlement store, as read (undefined: not asked). */
  pending?: { key: string; transaction: string | undefined } | undefined;
  /** Its quota reservation, granted in the same statement (undefined: not asked, or not granted). */
  reserved?: { month: string; plan: string | null } | undefined;
}

/**
 * One group-commit flush of intents, in one statement: `insertIntents`, or
 * `insertCheckedIntents` when any of them asks about its payer's cooling,
 * its pending-store row or its quota reservation. Answers each intent in
 * the order given.
 */
export async function writeIntents(
  db: Kysely<Database>,
  intents: readonly CheckedIntent[],
  quota?: IntentReservations,
): Promise<IntentWritten[]> {
  if (
    intents.every(
      (i) => i.coolingSince === undefined && i.pendingKey === undefined && !(quota && i.reserve),
    )
  ) {
    const inserted = await insertIntents(
      db,
      intents.map((i) => i.row),
    );
    return intents.map((i) => ({ written: inserted.has(i.row.id) }));
  }
  const found = await insertCheckedIntents(db, intents, quota);
  return intents.map((i) => {
    const payer = i.coolingSince ? i.row.payer : undefined;
    const last = payer ? found.lastFailure.get(payer) : undefined;
    const written = found.inserted.has(i.row.id);
    const account = i.row.account_id;
    return {
      written,
      reserved:
        written && i.reserve && found.month && found.reserved.has(account)
          ? { month: found.month, plan: found.reserved.get(account) ?? null }
          : undefined,
      payerFailedAt: i.coolingSince && last && last > i.coolingSince ? last : undefined,
      payerKnown: payer ? found.known.has(payer) : undefined,
      pending: i.pendingKey
        ? { key: i.pendingKey, transaction: found.pending.get(i.pendingKey) }
        : undefined,
    };
  });
}

/**
 * Journals transactions about to be broadcast, and gives each settlement the
 * reference of its first one, in one statement (a data-modifying WITH is
 * atomic like any statement). A reference already journaled is kept as it
 * is; a settlement that already has a reference keeps it.
 *
 * A settlement already decided `failed` (or `not_attempted`) takes no more
 * transactions: its entries are not written, and its id is missing from
 * the returned set, so its sender must not broadcast. A reconciler that
 * judged a slow settle interrupted ("nothing was sent") is then never
 * contradicted by a send that follows. A `succeeded` one still takes them:
 * a reorg's re-send (`reland`). The row lock its update takes is what
 * orders this against `finishFromChain` (see there).
 */
export async function journalSent(
  db: Kysely<Database>,
  sent: readonly SentTransaction[],
): Promise<Set<string>> {
  const first = new Map<string, string | null>();
  for (const { entry, settlementId } of sent) {
    if (!settlementId) continue;
    if (!entry.replaces && !first.get(settlementId)) first.set(settlementId, entry.reference);
    else if (!first.has(settlementId)) first.set(settlementId, null);
  }
  const column = <T>(pick: (s: SentTransaction) => T) => sent.map(pick);
  const { rows } = await sql<{ id: string }>`
    with open as (
      update settlements s
      set transaction = coalesce(s.transaction, f.reference)
      from unnest(${[...first.keys()]}::uuid[], ${[...first.values()]}::text[])
        as f(id, reference)
      where s.id = f.id and s.status in ('pending', 'succeeded')
      returning s.id
    ), journaled as (
      insert into settlement_transactions
        (reference, settlement_id, network, signer, replaces, detail, worst_fee)
      select * from unnest(
        ${column((s) => s.entry.reference)}::text[],
        ${column((s) => s.settlementId ?? null)}::uuid[],
        ${column((s) => s.entry.network)}::text[],
        ${column((s) => s.entry.signer?.toLowerCase() ?? null)}::text[],
        ${column((s) => s.entry.replaces ?? null)}::text[],
        ${column((s) => JSON.stringify(s.entry.detail))}::jsonb[],
        ${column((s) => s.entry.worstFee?.toString() ?? null)}::numeric[]
      ) as e(reference, settlement_id, network, signer, replaces, detail, worst_fee)
      where e.settlement_id is null or e.settlement_id in (select id from open)
      on conflict (reference) do nothing
    )
    select id from open`.execute(db);
  return new Set(rows.map((r) => r.id));
}

/**
 * The signed bytes a journal entry keeps so a transaction can be sent again
 * (EVM `raw`, the XRPL `blob`, NEAR's `signedTransaction`, a Solana or
 * Starknet `transaction`). A reverted one is never sent again, so its bytes
 * go with its final status. A successful one is kept only while a reorg can
 * still take it back: the success watcher re-sends it exactly as signed, so
 * its bytes are dropped once its watch is over (`dropSignedMaterial`).
 * Signed material does not stay at rest (0031 dropped those already stored).
 */
const SIGNED_DETAIL_KEYS = ["raw", "blob", "signedTransaction", "transaction"];

/**
 * The same list written into the statement, not bound: the sweep's rows are
 * found through the partial index on entries that hold signed bytes (0035),
 * and the planner matches an index's predicate only against a constant.
 */
const SIGNED_DETAIL_KEYS_LITERAL = sql.raw(
  `ARRAY[${SIGNED_DETAIL_KEYS.map((k) => `'${k}'`).join(", ")}]::text[]`,
);

/** The chain's final word on journaled transactions. */
export async function journalMined(
  db: Kysely<Database>,
  mined: readonly MinedTransaction[],
): Promise<void> {
  await journalMinedStatement(mined).execute(db);
}

/** `journalMined`'s statement, which a settle's outcome statement also runs as one of its parts. */
export function journalMinedStatement(mined: readonly MinedTransaction[]): RawBuilder<unknown> {
  return sql`
    update settlement_transactions t
    set status = m.status, block_number = coalesce(m.block_number, t.block_number),
      fee = coalesce(m.fee, t.fee),
      failure_cause = coalesce(m.failure_cause, t.failure_cause),
      detail = case when m.status = 'reverted' then t.detail - ${SIGNED_DETAIL_KEYS}::text[]
        else t.detail end
    from unnest(
      ${mined.map((m) => m.reference)}::text[],
      ${mined.map((m) => m.status)}::text[],
      ${mined.map((m) => (m.block === undefined ? null : m.block.toString()))}::bigint[],
      ${mined.map((m) => (m.fee === undefined ? null : m.fee.toString()))}::numeric[],
      ${mined.map((m) => m.cause ?? null)}::text[]
    ) as m(reference, status, block_number, fee, failure_cause)
    where t.reference = m.reference
      -- The reorg watch reports a success it already recorded every pass:
      -- a row that would not change is not written again (a new row version,
      -- signed body and all, for nothing).
      and (t.status is distinct from m.status
        or t.block_number is distinct from coalesce(m.block_number, t.block_number)
        or t.fee is distinct from coalesce(m.fee, t.fee)
        or t.failure_cause is distinct from coalesce(m.failure_cause, t.failure_cause))`;
}

/**
 * Drops the signed bytes of journal entries no reorg watch needs any more:
 * those of a final settlement that finished before `before`, and those of a
 * mined entry with no settlement (a sponsored funding) sent before it. The
 * settlements in `keep` keep theirs: the watch still follows them past
 * their window (a success re-sent after a reorg, not yet final).
 */
export async function dropSignedMaterial(
  db: Kysely<Database>,
  before: Date,
  keep: readonly string[] = [],
): Promise<void> {
  await dropSignedMaterialStatement(before, keep).execute(db);
}

/** The sweep's statement (tests read its plan). */
export function dropSignedMaterialStatement(before: Date, keep: readonly string[] = []) {
  const kept = keep.length === 0 ? sql`` : sql`and s.id <> all(${[...keep]}::uuid[])`;
  return sql`
    update settlement_transactions t
    set detail = t.detail - ${SIGNED_DETAIL_KEYS_LITERAL}
    where t.detail ?| ${SIGNED_DETAIL_KEYS_LITERAL}
      and (exists (select 1 from settlements s where s.id = t.settlement_id
          and s.status <> 'pending' and s.finished_at < ${before} ${kept})
        or (t.settlement_id is null and t.status <> 'sent' and t.created_at < ${before}))`;
}

// Every column but the stored request; a Record, so a new column must be listed.
const OUTCOME_COLUMNS = Object.keys({
  id: true,
  account_id: true,
  api_key_id: true,
  network: true,
  scheme: true,
  payer: true,
  pay_to: true,
  asset: true,
  amount: true,
  payload_fingerprint: true,
  status: true,
  transaction: true,
  error_reason: true,
  error_message: true,
  started_at: true,
  finished_at: true,
  duration_ms: true,
  units: true,
  authorization_key: true,
  attempts: true,
  billed: true,
  success_answered_at: true,
  success_request_id: true,
  settled_amount: true,
  failure_cause: true,
} satisfies Record<keyof SettlementOutcomeRow, true>);

export interface TransitionOptions {
  /**
   * Also mark a success that sent a transaction as billed, in the same
   * statement: the caller charges exactly the returned rows whose
   * `billed` is true. (A pending row is never billed, since only a final
   * outcome is charged, so `billed` true on a returned row means this
   * transition marked it.)
   */
  markBilled: boolean;
}

/**
 * Moves pending rows to their outcomes, in the caller's transaction, and
 * returns the rows it moved. Guarded like a lone transition: a row no longer
 * pending (a retry or the reconciler learned the outcome first) is left as
 * it is and not returned. One transition per row: a second one for the same
 * row in the same call is dropped (the first wins, as it would in sequence).
 * The stored request is not read back: nothing after an outcome needs it,
 * and it is most of a row's bytes. What the rows' webhook events need (the
 * endpoint's chosen events, the key's name) is read in the same statement,
 * which saves the outcome transaction two round trips.
 */
export async function transitionRows(
  trx: Transaction<Database>,
  transitions: readonly RowTransition[],
  opts: TransitionOptions = { markBilled: false },
): Promise<(SettlementOutcomeRow & EventContext)[]> {
  const moved = await transitionStatement(transitions, opts).execute(trx);
  return moved.rows;
}

/** `transitionRows`'s statement, which a settle's outcome statement also runs as one of its parts. */
export function transitionStatement(
  transitions: readonly RowTransition[],
  opts: TransitionOptions,
): RawBuilder<SettlementOutcomeRow & EventContext> {
  const byId = new Map<string, RowTransition>();
  for (const t of transitions) if (!byId.has(t.id)) byId.set(t.id, t);
  const rows = [...byId.values()];
  const column = <T>(pick: (t: RowTransition) => T) => rows.map(pick);
  return sql<SettlementOutcomeRow & EventContext>`
    update settlements s
    set status = o.status,
        transaction = coalesce(o.transaction, s.transaction),
        error_reason = o.error_reason,
        error_message = o.error_message,
        payer = coalesce(o.payer, s.payer),
        finished_at = o.finished_at,
        duration_ms = o.duration_ms,
        billed = s.billed or (${opts.markBilled}
          and o.status = 'succeeded'
          and coalesce(o.transaction, s.transaction) is not null),
        settled_amount = coalesce(o.settled_amount, s.settled_amount),
        success_answered_at = case when o.status = 'succeeded' and o.answered_to is not null
          then o.finished_at else s.success_answered_at end,
        success_request_id = case when o.status = 'succeeded' and o.answered_to is not null
          then o.answered_to else s.success_request_id end,
        request = case when o.status <> 'pending' then ${REDACTED_REQUEST} else s.request end
    from unnest(
      ${column((t) => t.id)}::uuid[],
      ${column((t) => t.status)}::text[],
      ${column((t) => t.transaction)}::text[],
      ${column((t) => t.errorReason)}::text[],
      ${column((t) => t.errorMessage)}::text[],
      ${column((t) => t.payer)}::text[],
      ${column((t) => t.settledAmount)}::text[],
      ${column((t) => t.answeredTo)}::text[],
      ${column((t) => t.finishedAt)}::timestamptz[],
      ${column((t) => t.durationMs)}::int[]
    ) as o(id, status, transaction, error_reason, error_message, payer, settled_amount,
      answered_to, finished_at, duration_ms)
    where s.id = o.id and s.status = 'pending'
    returning ${sql.join(OUTCOME_COLUMNS.map((c) => sql.ref(`s.${c}`)))},
      (select w.events from webhook_endpoints w where w.account_id = s.account_id)
        as endpoint_events,
      (select k.name from api_keys k where k.id = s.api_key_id) as api_key_name`;
}
