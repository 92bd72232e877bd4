/**
 * Monthly quota: reserve before a settle runs, commit or release after.
 *
 * Invariant: for an account and month, `used + reserved` never exceeds the
 * plan's hard limit. Concurrent reservations share one flush (group
 * commit). When they are all one account's and all fit, one guarded UPDATE
 * grants them. Otherwise one transaction first locks each account's month
 * row, then grants the requests in arrival order while they fit under the
 * limit, then adds what it granted. Either way another replica waits for
 * the row's lock, so N parallel settles with one unit left give exactly one
 * reservation. The plan is read from the account row on every flush, so an
 * upgrade (or suspension) applies to the very next request.
 */
import { randomUUID } from "node:crypto";
import { sql, type ExpressionBuilder, type RawBuilder, type Transaction } from "kysely";
import type { Db } from "../../storage/db.js";
import { DEFAULT_MAX_BATCH, GroupCommit } from "../../storage/groupCommit.js";
import type { Database } from "../../storage/schema.js";
import { ServiceError } from "../../lib/errors.js";
import { announceChange } from "../../storage/changeFeed.js";
import { API_KEYS_CHANGED } from "../keys/apiKeys.js";
import { recordBillingEvent } from "../webhooks/billingEvents.js";
import {
  DEFAULT_FAILURES_PER_HOUR,
  FAILURE_WINDOW_MS,
  guardedReservation,
} from "./reservationGuard.js";
import {
  FREE_PLAN_LIMIT,
  PAYG_UNIT_PRICE_MICRO_USD,
  UPGRADE_PATH,
  holdsFreeLimits,
  monthOf,
  paygBillableUnits,
  planRule,
  usdOf,
  type PlanLimits,
  type PlanName,
} from "./plans.js";

export interface QuotaReservation {
  accountId: string;
  month: string;
  units: number;
  plan: PlanName;
}

/** An account's month row as a charge left it, with the account's plan. */
interface ChargedMonth {
  account_id: string;
  month: string;
  used: number;
  plan: string | null;
}

/** Units of usage for a settlement that just succeeded. */
export interface QuotaCharge {
  accountId: string;
  units: number;
  settlementId: string | null;
}

interface ReserveRequest {
  accountId: string;
  units: number;
  /** The network the settle is for: the failure limit is counted per network. */
  network: string;
}

/** When settles in flight hold an account with failures of its own: retry after about one settle. */
const IN_FLIGHT_RETRY_MS = 10_000;

export class QuotaLedger {
  private readonly reservations: GroupCommit<ReserveRequest, QuotaReservation>;

  constructor(
    private readonly db: Db,
    private readonly limits: PlanLimits,
    private readonly now: () => Date = () => new Date(),
    /** Told when a commit or release could not be written (the settle's answer stands). */
    private readonly onError: (e: unknown, what: string) => void = () => {},
  ) {
    this.reservations = new GroupCommit((requests) => this.reserveAll(requests), {
      maxBatch: DEFAULT_MAX_BATCH,
    });
  }

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
   * (`quota_exceeded`, or `account_suspended`) with the body of spec 2.8,
   * or 429 (`too_many_failed_settlements`) when the account's settlements
   * on `network` failed on-chain too often in the last hour. Every settle
   * asks, whatever its units (0 reserves nothing): a suspended or
   * throttled account is refused even a settle that costs no quota.
   */
  reserve(accountId: string, units: number, network: string): Promise<QuotaReservation> {
    return this.reservations.submit({ accountId, units, network });
  }

  /** One flush of reservations: each is granted or refused on its own, in arrival order. */
  private async reserveAll(
    requests: readonly ReserveRequest[],
  ): Promise<PromiseSettledResult<QuotaReservation>[]> {
    const at = this.now();
    const month = monthOf(at);
    // Sorted, so two flushes (two replicas) lock shared rows in the same order.
    const accountIds = unique(requests.map((r) => r.accountId)).sort();
    if (accountIds.length === 1) {
      const granted = await this.reserveAllOfOne(accountIds[0]!, requests, month, at);
      if (granted) return granted;
    }
    const throttled = await this.throttled(requests, at);
    const rest = requests.filter((r) => !throttled.has(failureKey(r)));
    const granted =
      rest.length > 0
        ? await this.reserveInTurn(rest, unique(rest.map((r) => r.accountId)).sort(), month, at)
        : [];
    let next = 0;
    return requests.map(
      (r) =>
        (throttled.has(failureKey(r))
          ? { status: "rejected", reason: throttled.get(failureKey(r)) }
          : granted[next++]!) as PromiseSettledResult<QuotaReservation>,
    );
  }

  /**
   * The refusals of the requests whose account and network are over the
   * failure limit: settlements that failed after something was sent (our
   * gas spent) in the last hour, the account's own (a failure its payer
   * caused is the payer's: see payerCooling.ts). Once an account has
   * such failures, its settles in flight on the network count too, as the
   * failures they may become. One indexed read per flush, which finds
   * nothing for an honest account; the plan is read only for the few that
   * are near a limit.
   */
  private async throttled(
    requests: readonly ReserveRequest[],
    at: Date,
  ): Promise<Map<string, ServiceError>> {
    const pairs = [...new Map(requests.map((r) => [failureKey(r), r])).values()];
    const since = new Date(at.getTime() - FAILURE_WINDOW_MS);
    const limits = this.limits.failuresPerHour ?? DEFAULT_FAILURES_PER_HOUR;
    const rows = await sql<{
      account_id: string;
      network: string;
      failed_at: Date[];
      in_flight: number;
    }>`
      select s.account_id, s.network,
        array_agg(s.finished_at order by s.finished_at desc) as failed_at,
        (select count(*) from settlements p
          where p.account_id = s.account_id and p.network = s.network
            and p.status = 'pending' and p.started_at > ${since})::int as in_flight
      from settlements s
      join unnest(${pairs.map((p) => p.accountId)}::uuid[], ${pairs.map((p) => p.network)}::text[])
        as r(account_id, network) on s.account_id = r.account_id and s.network = r.network
      where s.status = 'failed' and s.transaction is not null and s.finished_at > ${since}
        and coalesce(s.failure_cause, 'requirements') = 'requirements'
      group by s.account_id, s.network`.execute(this.db);
    const refusals = new Map<string, ServiceError>();
    if (rows.rows.length === 0) return refusals;
    const plans = new Map(
      (
        await this.db
          .selectFrom("accounts")
          .select(["id", "plan", "balance_micro_usd"])
          .where(
            "id",
            "in",
            rows.rows.map((r) => r.account_id),
          )
          .execute()
      ).map((a) => [
        a.id,
        {
          name: planRule(a.plan ?? "free", this.limits).name,
          free: holdsFreeLimits(a.plan, a.balance_micro_usd),
        },
      ]),
    );
    for (const row of rows.rows) {
      const held = plans.get(row.account_id) ?? { name: "free" as const, free: true };
      const plan = held.name;
      const limit = held.free ? limits.free : limits.paid;
      const failures = row.failed_at.length;
      // The request's own pending row is among those in flight.
      const waiting = failures < limit && failures + row.in_flight > limit;
      if (failures < limit && !waiting) continue;
      // Settles resume once the failures in the window are fewer than the
      // limit: when the limit-th most recent one is an hour old; or, held
      // for settles in flight, once they have ended (a settle's time).
      const lifts = waiting
        ? at.getTime() + IN_FLIGHT_RETRY_MS
        : new Date(row.failed_at[limit - 1]!).getTime() + FAILURE_WINDOW_MS;
      const retryAfterSeconds = Math.max(1, Math.ceil((lifts - at.getTime()) / 1000));
      const counted = waiting
        ? `${failures} of this account's settlements on ${row.network} failed on-chain in the last hour and ${row.in_flight} are in flight`
        : `${failures} of this account's settlements on ${row.network} failed on-chain in the last hour`;
      refusals.set(
        `${row.account_id}|${row.network}`,
        new ServiceError(
          "too_many_failed_settlements",
          `${counted}, each at our gas cost; the ${plan} plan allows ${limit}. Settles on ${row.network} resume in ${retryAfterSeconds} s: check the payments you send (an asset, balance or signature that fails on-chain) before retrying`,
          {
            retryable: true,
            details: { network: row.network, failures, limit, plan, retryAfterSeconds },
          },
        ),
      );
    }
    return refusals;
  }

  /**
   * The common case of a busy account, in one statement: when all of one
   * account's requests in a flush fit under its limit together, a single
   * guarded UPDATE grants them all (reservationGuard.ts), which is what
   * granting them in turn would do. Its settles' own intent rows are
   * committed already, so the statement sees them among those in flight.
   * Anything else writes nothing here and is decided in turn.
   */
  private async reserveAllOfOne(
    accountId: string,
    requests: readonly ReserveRequest[],
    month: string,
    at: Date,
  ): Promise<PromiseSettledResult<QuotaReservation>[] | undefined> {
    const units = requests.reduce((n, r) => n + r.units, 0);
    const networks = unique(requests.map((r) => r.network));
    const granted = await sql<{ plan: string | null }>`
      with asked as (
        select ${accountId}::uuid as account_id, ${units}::int as units, 0 as pending,
          ${networks}::text[] as networks
      ), ${guardedReservation(this.limits, "asked", month, at)}
      select plan from reserved`.execute(this.db);
    const row = granted.rows[0];
    if (!row) return undefined;
    const plan = planRule(row.plan ?? "free", this.limits).name;
    return requests.map((r) => ({
      status: "fulfilled",
      value: { accountId, month, units: r.units, plan },
    }));
  }

  /**
   * The reservation as a part of the statement that writes settles'
   * intents: the CTEs that grant what `asked` asks (see
   * `guardedReservation`), in this month. `reservationOf` turns what they
   * return into each settle's reservation; a settle not granted there asks
   * `reserve`, which decides it exactly.
   */
  reservationPart(asked: string): { ctes: RawBuilder<unknown>; month: string } {
    const at = this.now();
    const month = monthOf(at);
    return { ctes: guardedReservation(this.limits, asked, month, at), month };
  }

  /** A settle's reservation granted by `reservationPart`, its account's plan as the part returned it. */
  reservationOf(
    accountId: string,
    month: string,
    units: number,
    plan: string | null,
  ): QuotaReservation {
    return { accountId, month, units, plan: planRule(plan ?? "free", this.limits).name };
  }

  /**
   * Decides each request in arrival order, in one transaction that first
   * locks (creating where needed) every account's month row.
   */
  private async reserveInTurn(
    requests: readonly ReserveRequest[],
    accountIds: readonly string[],
    month: string,
    at: Date,
  ): Promise<PromiseSettledResult<QuotaReservation>[]> {
    return this.db.transaction().execute(async (tx) => {
      // An upsert whose update changes nothing: it creates the month's row
      // where there is none, locks every row until this transaction ends,
      // and returns what each holds with its account's plan, in one statement.
      const rows = await tx
        .insertInto("quota_usage")
        .values(accountIds.map((id) => ({ account_id: id, month })))
        .onConflict((oc) =>
          oc
            .columns(["account_id", "month"])
            .doUpdateSet({ updated_at: sql<Date>`quota_usage.updated_at` }),
        )
        .returning((eb) => [
          "account_id",
          "used",
          "reserved",
          accountOf(eb).select("plan").as("plan"),
          accountOf(eb).select("balance_micro_usd").as("balance_micro_usd"),
          accountOf(eb).select("suspended_at").as("suspended_at"),
          accountOf(eb).select("suspended_by").as("suspended_by"),
        ])
        .execute();
      const usage = new Map(rows.map((r) => [r.account_id, { ...r }]));
      const granted = new Map<string, number>();
      const results = requests.map((r): PromiseSettledResult<QuotaReservation> => {
        const held = usage.get(r.accountId)!;
        const rule = planRule(held.plan ?? "free", this.limits);
        const refuse = (code: "quota_exceeded" | "account_suspended", inFlightCap = false) => ({
          status: "rejected" as const,
          reason: this.refusal(code, rule.name, rule.reportedLimit, held, inFlightCap),
        });
        if (held.suspended_at) return refuse("account_suspended");
        if (rule.hardLimit !== null && held.used + held.reserved + r.units > rule.hardLimit) {
          return refuse("quota_exceeded");
        }
        if (
          rule.name === "payg" &&
          holdsFreeLimits(held.plan, held.balance_micro_usd ?? 0n) &&
          held.reserved + r.units > FREE_PLAN_LIMIT
        ) {
          return refuse("quota_exceeded", true);
        }
        held.reserved += r.units;
        granted.set(r.accountId, (granted.get(r.accountId) ?? 0) + r.units);
        return {
          status: "fulfilled",
          value: { accountId: r.accountId, month, units: r.units, plan: rule.name },
        };
      });
      if (granted.size > 0) {
        await sql`
          update quota_usage q
          set reserved = q.reserved + g.units, updated_at = ${at}
          from unnest(${[...granted.keys()]}::uuid[], ${[...granted.values()]}::int[])
            as g(account_id, units)
          where q.account_id = g.account_id and q.month = ${month}`.execute(tx);
      }
      return results;
    });
  }

  /** Turns the reservation into usage; for pay-as-you-go, accrues the charge in the same transaction. */
  async commit(r: QuotaReservation, settlementId: string | null): Promise<void> {
    await this.db
      .transaction()
      .execute((tx) =>
        this.chargeAndReleaseIn(
          tx,
          [{ accountId: r.accountId, units: r.units, settlementId }],
          [r],
        ),
      );
  }

  /**
   * Charges settlements that just succeeded and gives reservations back, in
   * the caller's transaction (the one that records the outcomes), in one
   * statement however many accounts: each account's month row gets its
   * charge and its release in one write. The rows are written, and so
   * locked, in sorted order, as reservations lock them, so two replicas'
   * transactions never hold one row each while waiting for the other's (a
   * deadlock). For pay-as-you-go, the charges past the free allowance are
   * inserted after it.
   */
  async chargeAndReleaseIn(
    tx: Transaction<Database>,
    charges: readonly QuotaCharge[],
    reservations: readonly QuotaReservation[],
  ): Promise<void> {
    const month = monthOf(this.now());
    const counted = charges.filter((c) => c.units > 0);
    const deltas = new Map<
      string,
      { accountId: string; month: string; used: number; freed: number }
    >();
    const delta = (accountId: string, m: string) => {
      const key = `${accountId} ${m}`;
      let d = deltas.get(key);
      if (!d) deltas.set(key, (d = { accountId, month: m, used: 0, freed: 0 }));
      return d;
    };
    for (const c of counted) delta(c.accountId, month).used += c.units;
    for (const r of reservations) delta(r.accountId, r.month).freed += r.units;
    if (deltas.size === 0) return;
    const rows = [...deltas.values()].sort((a, b) =>
      a.accountId === b.accountId
        ? a.month.localeCompare(b.month)
        : a.accountId < b.accountId
          ? -1
          : 1,
    );
    const column = <T>(pick: (d: (typeof rows)[number]) => T) => rows.map(pick);
    const written = await sql<ChargedMonth>`
      with deltas as (
        select * from unnest(
          ${column((d) => d.accountId)}::uuid[],
          ${column((d) => d.month)}::text[],
          ${column((d) => d.used)}::int[],
          ${column((d) => d.freed)}::int[]
        ) with ordinality as d(account_id, month, used, freed, ord)
      )
      ${this.upsertDeltas()}`.execute(tx);
    const charged = new Map(
      written.rows.filter((r) => r.month === month).map((r) => [r.account_id, r]),
    );
    await this.insertPaygCharges(tx, counted, month, (accountId) => {
      const row = charged.get(accountId);
      return row && { used: row.used - deltas.get(`${accountId} ${month}`)!.used, plan: row.plan };
    });
  }

  /**
   * Adds each account's month `deltas` (a CTE: account_id, month, used,
   * freed, ord) to its usage row, freeing the reservations they give back.
   * The rows are written, and so locked, in `ord` order, which is sorted as
   * reservations lock them, so two replicas' writes never hold one row each
   * while waiting for the other's (a deadlock).
   */
  private upsertDeltas(): RawBuilder<ChargedMonth> {
    return sql<ChargedMonth>`
      insert into quota_usage (account_id, month, used)
      select account_id, month, used from deltas order by ord
      on conflict (account_id, month) do update set
        used = quota_usage.used + excluded.used,
        reserved = greatest(
          quota_usage.reserved - (
            select d.freed from deltas d
             where d.account_id = excluded.account_id and d.month = excluded.month),
          0),
        updated_at = ${new Date()}
      returning account_id, month, used,
        (select plan from accounts a where a.id = quota_usage.account_id) as plan`;
  }

  /**
   * The quota part of the one statement that records settles' outcomes
   * (outcomeStatement.ts): the CTEs `deltas` and `charged`, which charge
   * each row of `moved` that its transition marked billed to the current
   * month and give `reservations` back. Undefined when one of them is
   * pay-as-you-go: its charges are billed against the usage before them,
   * which only the upsert's answer gives, so those outcomes are written in
   * a transaction (chargeAndReleaseIn).
   */
  outcomeCharges(
    moved: string,
    reservations: readonly QuotaReservation[],
  ): { ctes: RawBuilder<unknown>; month: string } | undefined {
    if (reservations.some((r) => planRule(r.plan, this.limits).name === "payg")) return undefined;
    const month = monthOf(this.now());
    const m = (column: string) => sql.ref(`m.${column}`);
    return {
      month,
      ctes: sql`deltas as (
        select account_id, month, sum(used)::int as used, sum(freed)::int as freed,
          row_number() over (order by account_id, month) as ord
        from (
          select ${m("account_id")} as account_id, ${month}::text as month,
            ${m("units")} as used, 0 as freed
          from ${sql.table(moved)} m where ${m("billed")} and ${m("units")} > 0
          union all
          select * from unnest(
            ${reservations.map((r) => r.accountId)}::uuid[],
            ${reservations.map((r) => r.month)}::text[],
            ${reservations.map(() => 0)}::int[],
            ${reservations.map((r) => r.units)}::int[]
          )
        ) x group by account_id, month
      ),
      charged as (${this.upsertDeltas()})`,
    };
  }

  /**
   * Pay-as-you-go charges for successes already counted in `month` by the
   * outcome statement, for an account whose plan became pay-as-you-go
   * while its settles ran (the statement is taken only when no reservation
   * was). `usedAfter` is the account's usage once those charges were added.
   */
  async billPaygAfter(
    charges: readonly QuotaCharge[],
    month: string,
    usedAfter: ReadonlyMap<string, { used: number; plan: string | null }>,
  ): Promise<void> {
    const counted = charges.filter((c) => c.units > 0);
    const total = new Map<string, number>();
    for (const c of counted) total.set(c.accountId, (total.get(c.accountId) ?? 0) + c.units);
    await this.db.transaction().execute((tx) =>
      this.insertPaygCharges(tx, counted, month, (accountId) => {
        const after = usedAfter.get(accountId);
        return after && { used: after.used - (total.get(accountId) ?? 0), plan: after.plan };
      }),
    );
  }

  /**
   * Adds the usage of a settlement that just succeeded, in the caller's
   * transaction (the one that records the success), so a payment is billed
   * exactly when, and exactly once, its success is committed. The plan is
   * read now: a late success (a retry or the reconciler learning it from the
   * chain) bills the month and plan in force when it is learned.
   */
  async chargeIn(
    tx: Transaction<Database>,
    accountId: string,
    units: number,
    settlementId: string | null,
  ): Promise<void> {
    await this.chargeAndReleaseIn(tx, [{ accountId, units, settlementId }], []);
  }

  /**
   * Pay-as-you-go bills the units past the free allowance, each charge
   * against the usage before it, in the order given. `before` gives an
   * account's usage before these charges, with its plan.
   */
  private async insertPaygCharges(
    tx: Transaction<Database>,
    counted: readonly QuotaCharge[],
    month: string,
    before: (accountId: string) => { used: number; plan: string | null } | undefined,
  ): Promise<void> {
    const usedBefore = new Map<string, number>();
    const billed = [];
    for (const c of counted) {
      const account = before(c.accountId);
      if (!account || planRule(account.plan ?? "free", this.limits).name !== "payg") continue;
      const from = usedBefore.get(c.accountId) ?? account.used;
      usedBefore.set(c.accountId, from + c.units);
      const billable = paygBillableUnits(from, from + c.units);
      if (billable <= 0) continue;
      billed.push({
        id: randomUUID(),
        account_id: c.accountId,
        month,
        settlement_id: c.settlementId,
        units: billable,
        amount_micro_usd: billable * PAYG_UNIT_PRICE_MICRO_USD,
      });
    }
    if (billed.length === 0) return;
    await tx.insertInto("usage_charges").values(billed).execute();
    const owed = new Map<string, number>();
    for (const b of billed)
      owed.set(b.account_id, (owed.get(b.account_id) ?? 0) + b.amount_micro_usd);
    await drawPaygBalances(tx, owed, this.limits.paygGraceMicroUsd ?? 0, this.now());
  }

  /**
   * Takes back what a success was charged, in the caller's transaction (the
   * one that records the success revoked, after a reorg removed it): its
   * units from the month it was counted in, and a pay-as-you-go charge's
   * amount back to the prepaid balance, lifting a suspension that balance
   * made once it covers the grace again. A payment that did not land is
   * never paid for.
   */
  async revokeChargeIn(
    tx: Transaction<Database>,
    settlement: { id: string; account_id: string; units: number; finished_at: Date | null },
  ): Promise<void> {
    const charges = await tx
      .deleteFrom("usage_charges")
      .where("settlement_id", "=", settlement.id)
      .returning(["month", "amount_micro_usd"])
      .execute();
    const month =
      charges[0]?.month ?? new Date(settlement.finished_at ?? this.now()).toISOString().slice(0, 7);
    await tx
      .updateTable("quota_usage")
      .set({ used: sql<number>`greatest(used - ${settlement.units}, 0)` })
      .where("account_id", "=", settlement.account_id)
      .where("month", "=", month)
      .execute();
    const refund = charges.reduce((sum, c) => sum + BigInt(c.amount_micro_usd), 0n);
    if (refund === 0n) return;
    const grace = BigInt(this.limits.paygGraceMicroUsd ?? 0);
    const lifted = await sql<{ balance: string; lifted: boolean }>`
      with before as (
        select id, suspended_by from accounts where id = ${settlement.account_id} for update
      )
      update accounts a set
        balance_micro_usd = a.balance_micro_usd + ${refund.toString()}::bigint,
        suspended_at = case when b.suspended_by = ${BILLING_SUSPENSION}
          and a.balance_micro_usd + ${refund.toString()}::bigint >= -${grace.toString()}::bigint
          then null else a.suspended_at end,
        suspended_reason = case when b.suspended_by = ${BILLING_SUSPENSION}
          and a.balance_micro_usd + ${refund.toString()}::bigint >= -${grace.toString()}::bigint
          then null else a.suspended_reason end,
        suspended_by = case when b.suspended_by = ${BILLING_SUSPENSION}
          and a.balance_micro_usd + ${refund.toString()}::bigint >= -${grace.toString()}::bigint
          then null else a.suspended_by end
      from before b
      where a.id = b.id
      returning a.balance_micro_usd::text as balance,
        (b.suspended_by = ${BILLING_SUSPENSION} and a.suspended_by is null) as lifted`.execute(tx);
    const row = lifted.rows[0];
    // Pay-as-you-go's paid limits come back with a positive balance: every
    // replica's key cache holds the rate limit it applies.
    if (row && BigInt(row.balance) > 0n && BigInt(row.balance) - refund <= 0n) {
      await announceChange(tx, API_KEYS_CHANGED);
    }
    if (row?.lifted) {
      await recordBillingEvent(
        tx,
        settlement.account_id,
        "billing.suspension_lifted",
        {
          balanceMicroUsd: row.balance,
          balanceUsd: usdOf(row.balance),
          settlementId: settlement.id,
        },
        this.now(),
      );
    }
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

  private refusal(
    code: "quota_exceeded" | "account_suspended",
    plan: PlanName,
    limit: number,
    held: { used: number; reserved: number; suspended_by?: string | null },
    /** Refused for settles in flight, not for the month's units. */
    inFlightCap = false,
  ): ServiceError {
    // Units held by settles still running count as used: they are why this
    // request was refused, and "9 of 10 used" next to a 402 would read as a bug.
    const inFlight = held.reserved;
    const usedThisMonth = held.used + inFlight;
    const settling =
      inFlight > 0
        ? ` (${inFlight} of them belong to settlements still running; a unit comes back if its settlement fails)`
        : "";
    const message =
      code === "account_suspended"
        ? held.suspended_by === BILLING_SUSPENSION
          ? `this pay-as-you-go account's balance does not cover its charges, so /settle is refused; /verify still works. Top up the balance with an x402 payment at ${UPGRADE_PATH} (or in the dashboard): the suspension lifts at once`
          : "this account is suspended by the operator, so /settle is refused; /verify still works. Contact the operator to resume it"
        : inFlightCap
          ? `a pay-as-you-go account without a prepaid balance may have at most ${FREE_PLAN_LIMIT} settlements running at once, as the free plan; retry when one finishes, or top up the balance at ${UPGRADE_PATH} to lift it (/verify still works)`
          : `the ${plan} plan allows ${limit} settlements a month and they are used up${settling}; upgrade the plan to settle again (/verify still works)`;
    // Exactly the fields of spec body 2.8 (the envelope adds error, message, requestId).
    return new ServiceError(code, message, {
      details: { plan, limit, usedThisMonth, upgrade: UPGRADE_PATH },
    });
  }
}

/** The account row of a quota row, for reading its plan in the same statement. */
const accountOf = (eb: ExpressionBuilder<Database, "quota_usage">) =>
  eb.selectFrom("accounts").whereRef("accounts.id", "=", "quota_usage.account_id");

const unique = <T>(values: readonly T[]): T[] => [...new Set(values)];

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
  // The operator's suspension is the operator's to lift: a top-up lifts
  // only the one the balance made (suspended_by 'billing').
  await db
    .updateTable("accounts")
    .set({
      suspended_at: suspended ? new Date() : null,
      suspended_reason: suspended ? reason?.trim() || null : null,
      suspended_by: suspended ? "operator" : null,
    })
    .where("id", "=", accountId)
    .execute();
}

/** `accounts.suspended_by` when pay-as-you-go's balance, not the operator, suspended the account. */
export const BILLING_SUSPENSION = "billing";

/**
 * Draws pay-as-you-go charges from the accounts' prepaid balances, in the
 * transaction that records the charges (and so the settlements' successes):
 * a charge is paid from the balance exactly when it is committed. A charge
 * that takes a balance below the operator's grace suspends the account in
 * the same statement (the next /settle answers 402) and writes its
 * `billing.account_suspended` event there too. Rows are locked in account
 * order, as every other writer of several accounts locks them.
 */
async function drawPaygBalances(
  tx: Transaction<Database>,
  owed: ReadonlyMap<string, number>,
  graceMicroUsd: number,
  now: Date,
): Promise<void> {
  const ids = [...owed.keys()].sort();
  const drawn = await sql<{ id: string; balance: string; suspended_now: boolean }>`
    with charge as (
      select * from unnest(${ids}::uuid[], ${ids.map((id) => owed.get(id)!)}::bigint[])
        as c(account_id, amount)
    ), before as (
      select a.id, a.suspended_at from accounts a
      where a.id = any(${ids}::uuid[]) order by a.id for update
    )
    update accounts a set
      balance_micro_usd = a.balance_micro_usd - c.amount,
      suspended_at = case when b.suspended_at is null
        and a.balance_micro_usd - c.amount < -${graceMicroUsd}::bigint
        then ${now} else a.suspended_at end,
      suspended_by = case when b.suspended_at is null
        and a.balance_micro_usd - c.amount < -${graceMicroUsd}::bigint
        then ${BILLING_SUSPENSION} else a.suspended_by end
    from charge c, before b
    where a.id = c.account_id and b.id = a.id
    returning a.id, a.balance_micro_usd::text as balance,
      (b.suspended_at is null and a.suspended_at is not null) as suspended_now`.execute(tx);
  for (const row of drawn.rows) {
    if (!row.suspended_now) continue;
    await recordBillingEvent(
      tx,
      row.id,
      "billing.account_suspended",
      {
        reason: "payg_balance",
        balanceMicroUsd: row.balance,
        balanceUsd: usdOf(row.balance),
        graceUsd: usdOf(graceMicroUsd),
        message:
          "the pay-as-you-go balance does not cover this month's charges: /settle answers 402 account_suspended until a top-up covers it",
      },
      now,
    );
  }
}

function failureKey(r: { accountId: string; network: string }): string {
  return `${r.accountId}|${r.network}`;
}
