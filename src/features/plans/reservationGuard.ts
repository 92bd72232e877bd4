/**
 * The guarded quota reservation: one UPDATE that grants an account's
 * requests together when they all fit, for each account asked. It is the
 * common case of a busy account (QuotaLedger.reserve), and it runs as a
 * part of the statement that writes settles' intents too (insertCheckedIntents),
 * so a settle that fits is reserved without a round trip of its own.
 * Anything it does not grant (no month row yet, a suspension, too few units
 * left, failures near the limit) writes nothing and is decided in turn, as
 * exactly as before, by QuotaLedger.
 */
import { sql, type RawBuilder } from "kysely";
import { FREE_PLAN_LIMIT, PLAN_NAMES, planRule, type PlanLimits } from "./plans.js";

/** How long failed settlements count against an account. */
export const FAILURE_WINDOW_MS = 60 * 60 * 1000;
/** On-chain failures an account may have per network and hour, when the config gives none. */
export const DEFAULT_FAILURES_PER_HOUR: Readonly<{ free: number; paid: number }> = {
  free: 20,
  paid: 500,
};

/**
 * The CTEs `locked` and `reserved` that grant what `asked` (a relation of
 * `account_id uuid, units int, pending int, networks text[]`, one row an
 * account) asks in `month`; `reserved` returns `account_id` and `plan` for
 * each account granted.
 *
 * - `units`: the account's requests together. All are granted or none.
 * - `pending`: its settles in flight that the statement's snapshot cannot
 *   see (intent rows written by the same statement), counted with those
 *   it can once the account has failures of its own.
 * - `networks`: the networks its requests are for. Their on-chain failures
 *   in the last hour are counted together under the plan's failure limit:
 *   stricter than per network; one over it is decided in turn, exactly.
 *
 * The rows are locked in account order first (`locked`), so two replicas'
 * statements never hold one row each while waiting for the other's. The
 * guard is checked again on the locked row (PostgreSQL re-reads a row
 * another transaction changed before updating it), so `used + reserved`
 * never passes the limit, and the row is locked only while the statement
 * runs.
 */
export function guardedReservation(
  limits: PlanLimits,
  asked: string,
  month: string,
  at: Date,
): RawBuilder<unknown> {
  // Each plan's hard limit (null: none); an unknown plan is held to the
  // free plan's, as planRule holds it.
  const limit = sql`(case coalesce(a.plan, 'free') ${sql.join(
    PLAN_NAMES.map((name) => sql`when ${name} then ${planRule(name, limits).hardLimit}::int`),
    sql` `,
  )} else ${planRule("free", limits).hardLimit}::int end)`;
  const failures = limits.failuresPerHour ?? DEFAULT_FAILURES_PER_HOUR;
  const since = new Date(at.getTime() - FAILURE_WINDOW_MS);
  const g = sql.table(asked);
  return sql`locked as (
      select l.account_id from quota_usage l
      where l.month = ${month} and l.account_id in (select account_id from ${g})
      order by l.account_id for update
    ), reserved as (
      update quota_usage q
      set reserved = q.reserved + g.units, updated_at = ${at}
      from ${g} g, accounts a
      where q.account_id = g.account_id and q.month = ${month} and a.id = q.account_id
        and q.account_id in (select account_id from locked)
        and a.suspended_at is null
        and (${limit} is null or q.used + q.reserved + g.units <= ${limit})
        -- Pay-as-you-go without a balance keeps Free's cap on settles in
        -- flight (Free's monthly cap bounds them there): the switch alone
        -- buys no concurrency.
        and (coalesce(a.plan, 'free') <> 'payg' or a.balance_micro_usd > 0
          or q.reserved + g.units <= ${FREE_PLAN_LIMIT}::int)
        and (select case
            when f.failed = 0 then true
            when f.failed >= f.lim then false
            -- With failures of its own, its settles in flight count too.
            else f.failed + g.pending + (select count(*) from settlements p
              where p.account_id = q.account_id and p.network = any(g.networks)
                and p.status = 'pending' and p.started_at > ${since}) <= f.lim
            end
          from (select count(*) as failed,
              (case when coalesce(a.plan, 'free') = 'free'
                  or (a.plan = 'payg' and a.balance_micro_usd <= 0) then ${failures.free}::int
                else ${failures.paid}::int end) as lim
            from settlements s
            where s.account_id = q.account_id and s.network = any(g.networks)
              and s.status = 'failed' and s.transaction is not null and s.finished_at > ${since}
              and coalesce(s.failure_cause, 'requirements') = 'requirements') f)
      returning q.account_id, a.plan
    )`;
}
