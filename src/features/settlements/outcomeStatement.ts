/**
 * Settles' outcomes in one statement: the chain's word on their
 * transactions (the journal), the guarded transitions of their rows, the
 * rows' webhook events (the outbox) and the quota: each success charged and
 * each reservation given back. One round trip for what was a transaction of
 * five, and atomic as that transaction was: a statement's parts commit
 * together or not at all.
 *
 * The parts are data-modifying CTEs, each reading what the one before it
 * moved through its RETURNING (a CTE sees the rows as they were before the
 * statement, never another part's writes).
 */
import { sql, type RawBuilder } from "kysely";
import type { QuotaReservation } from "../plans/quotaLedger.js";
import { settlementEventRows } from "../webhooks/events.js";
import {
  journalMinedStatement,
  transitionStatement,
  type MinedTransaction,
  type RowTransition,
} from "./settlementWrites.js";
import type { SettlementMetering } from "./transitionEffects.js";

/** A row the statement moved, with what its quota charge left. */
export interface MovedOutcome {
  id: string;
  account_id: string;
  status: string;
  success_request_id: string | null;
  units: number;
  billed: boolean;
  /** The account's usage in `month` after this statement's charges (null: not metered, or nothing charged). */
  quota_used: number | null;
  quota_plan: string | null;
}

/**
 * The statement, or undefined when these outcomes must be written in a
 * transaction instead (`SettlementMetering.outcomeCharges` says when).
 * `month` is the month charged.
 */
export function outcomeStatement(
  parts: {
    transitions: readonly RowTransition[];
    finished: readonly MinedTransaction[];
    reservations: readonly QuotaReservation[];
  },
  metering: SettlementMetering | undefined,
): { statement: RawBuilder<MovedOutcome>; month: string | undefined } | undefined {
  const charges = metering?.outcomeCharges("moved", parts.reservations);
  if (metering && !charges) return undefined;
  const ctes: RawBuilder<unknown>[] = [];
  if (parts.finished.length > 0)
    ctes.push(sql`finished as (${journalMinedStatement(parts.finished)})`);
  ctes.push(
    sql`moved as (${transitionStatement(parts.transitions, { markBilled: metering !== undefined })})`,
    sql`events as (
      insert into webhook_events (id, account_id, type, settlement_id, payload)
      ${settlementEventRows("moved")})`,
  );
  if (charges) ctes.push(charges.ctes);
  const quota = charges
    ? sql`c.used as quota_used, c.plan as quota_plan from moved m
        left join charged c on c.account_id = m.account_id and c.month = ${charges.month}`
    : sql`null::int as quota_used, null::text as quota_plan from moved m`;
  return {
    month: charges?.month,
    statement: sql<MovedOutcome>`
      with ${sql.join(ctes, sql`, `)}
      select m.id, m.account_id, m.status, m.success_request_id, m.units, m.billed, ${quota}`,
  };
}
