/**
 * The settlements table's one writer: every settle attempt's record, from
 * intent to outcome.
 *
 * Invariants:
 * - The row is written `pending` before the mechanism may broadcast (a crash
 *   mid-settle leaves a trace to reconcile), and finished before the
 *   response leaves.
 * - One live row (`pending`, or `succeeded` with a transaction) per payment
 *   authorization: the unique index of migrations 0008 and 0018 makes
 *   `begin` refuse a second one, so a duplicate never sends again.
 * - One success answer per payment: the guarded write that records it
 *   (`success_answered_at`) is the only way a request may answer
 *   `success: true` (see features/payments/duplicates.ts).
 * - A row leaves `pending` exactly once (every transition is guarded on
 *   `status = 'pending'`), and its webhook event and its quota charge are
 *   written in the same transaction as that transition, whoever makes it.
 *
 * The settle path's writes (intents, journal entries, receipts, outcomes)
 * go through group commit: concurrent settlements share one flush, and each
 * caller is answered only once its flush is committed, so "intent before
 * broadcast" and "outcome before answer" hold for every one of them.
 */
import { createHash, randomUUID } from "node:crypto";
import { sql, type Kysely, type Transaction } from "kysely";
import stringify from "safe-stable-stringify";
import type { FailedFeeExposure, FailureCause, ReconcileOutcome } from "../../chains/ports.js";
import type { SettleResponse } from "@x402/core/types";
import type { Db } from "../../storage/db.js";
import { DEFAULT_MAX_BATCH, GroupCommit } from "../../storage/groupCommit.js";
import type {
  Database,
  NewSettlement,
  SettlementOutcomeRow,
  SettlementRow,
} from "../../storage/schema.js";
import { ServiceError, describeError } from "../../lib/errors.js";
import type { Logger } from "../../lib/logger.js";
import type { PaymentRequest } from "../../protocol/index.js";
import type { JournalEntry, PendingSettlement } from "../../chains/ports.js";
import { storedSpelling } from "../../chains/index.js";
import type { ApiKeyPrincipal } from "../keys/authenticator.js";
import type { QuotaCharge, QuotaReservation } from "../plans/quotaLedger.js";
import { recordSettlementEvents } from "../webhooks/events.js";
import {
  dropSignedMaterial,
  insertIntents,
  journalMined,
  journalSent,
  transitionRows,
  HOLDS_AUTHORIZATION,
  REDACTED_REQUEST,
  type MinedTransaction,
  type RowTransition,
  type SentTransaction,
} from "./settlementWrites.js";

/** Stable identity of a signed payment: the same payload always maps here. */
export function paymentFingerprint(req: PaymentRequest): string {
  const canonical = stringify(req.paymentPayload.payload) ?? "";
  return createHash("sha256").update(canonical).digest("hex");
}

/**
 * Stable identity of a signed payment together with what it was asked to
 * pay (network, scheme, asset, amount, recipient): two requests with the
 * same fingerprint ask for the same transfer.
 */
export function requestFingerprint(req: PaymentRequest): string {
  const r = req.paymentRequirements;
  const canonical =
    stringify({
      payload: req.paymentPayload.payload,
      network: r.network,
      scheme: r.scheme,
      asset: storedSpelling(r.network, r.asset),
      amount: r.amount,
      payTo: storedSpelling(r.network, r.payTo),
    }) ?? "";
  return createHash("sha256").update(canonical).digest("hex");
}

/** A payer as claimed by an unverified payload: kept only if it looks like an address. */
function storablePayer(network: string, payer: string | undefined): string | null {
  return payer && /^[\x21-\x7e]{1,256}$/.test(payer) ? storedSpelling(network, payer) : null;
}

/** A verify's look-up: an authorization, and a payer (stored spelling) to check for cooling. */
interface LiveRead {
  key: string;
  payer?: string;
  since?: Date;
}

/** What a verify's look-up found. */
export interface LiveLookup {
  /** The authorization's live row, if any. */
  row: SettlementRow | undefined;
  /** When the payer's latest own on-chain failure ended, if after the `since` asked. */
  payerFailedAt: Date | undefined;
}

/** Quota side effects of settlements' transitions (absent: not metered). */
export interface SettlementMetering {
  /** Charges successes and gives reservations back, in the caller's transaction. */
  chargeAndReleaseIn(
    tx: Transaction<Database>,
    charges: readonly QuotaCharge[],
    reservations: readonly QuotaReservation[],
  ): Promise<void>;
  /** Takes back a revoked success's charge (units, and a pay-as-you-go amount), in the caller's transaction. */
  revokeChargeIn(
    tx: Transaction<Database>,
    settlement: { id: string; account_id: string; units: number; finished_at: Date | null },
  ): Promise<void>;
}

/**
 * A transaction was about to be sent for a settlement whose record is
 * already final without it (the reconciler, or a retry that asked the
 * chain, judged it interrupted): the record stands, and nothing is sent.
 */
export class SettlementDecidedError extends Error {
  constructor(readonly settlementId: string) {
    super(
      "this settlement was already recorded as finished while it ran (interrupted, nothing sent); nothing more is sent for it",
    );
    this.name = "SettlementDecidedError";
  }
}

export interface SettleIntent {
  principal: ApiKeyPrincipal;
  request: PaymentRequest;
  authorizationKey: string;
  payer: string | undefined;
  units: number;
}

/** What the chain (or a retry that asked it) says became of a pending row: a decided reconciliation. */
export type ChainOutcome = Exclude<ReconcileOutcome, { status: "pending" }>;

/** What a settle learned, to be written over its pending row. */
type Outcome = Pick<
  RowTransition,
  | "status"
  | "transaction"
  | "errorReason"
  | "errorMessage"
  | "payer"
  | "settledAmount"
  | "answeredTo"
>;

/** What became of a settle's outcome write. */
export interface FinishOutcome {
  /** False when the outcome could not be written (the row stays pending for the reconciler). */
  recorded: boolean;
  /** For a success: whether this request holds the payment's one success answer. */
  successAnswered: boolean;
}

/** A journal row as a reconciliation reads it. */
interface JournaledTransaction {
  reference: string;
  signer: string | null;
  replaces: string | null;
  detail: unknown;
}

interface OutcomeWrite {
  id: string;
  outcome: Outcome;
  startedAt: number;
  reservation: QuotaReservation | undefined;
}

export class SettlementRecorder {
  private readonly intents: GroupCommit<NewSettlement, boolean>;
  private readonly sent: GroupCommit<SentTransaction, undefined>;
  private readonly mined: GroupCommit<MinedTransaction, undefined>;
  private readonly outcomes: GroupCommit<OutcomeWrite, boolean>;
  private readonly liveReads: GroupCommit<LiveRead, LiveLookup>;
  private readonly journalReads: GroupCommit<string, JournaledTransaction[]>;

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
    private readonly metering?: SettlementMetering,
    /**
     * The same database for the writes that answer settles in flight (a
     * transaction's receipt, a settlement's outcome): on the embedded
     * database they go first.
     */
    private readonly finishing: Db = db,
    /**
     * The same database for a transaction's journal entry, the last step
     * before it leaves: on the embedded database it goes after answers and
     * before new work.
     */
    private readonly sending: Db = finishing,
  ) {
    const opts = { maxBatch: DEFAULT_MAX_BATCH };
    const done = <T>(items: readonly T[]) =>
      items.map(() => ({ status: "fulfilled", value: undefined }) as const);
    this.intents = new GroupCommit(async (rows) => {
      const inserted = await insertIntents(this.db, rows);
      return rows.map((r) => ({ status: "fulfilled", value: inserted.has(r.id) }) as const);
    }, opts);
    // A journal entry is the last step before its transaction leaves, for
    // a settle already in flight (on Starknet, inside an executor's turn,
    // which the executor's next send waits for): the sending lane.
    this.sent = new GroupCommit(async (sent) => {
      const open = await journalSent(this.sending, sent);
      const refused = sent.flatMap((s) =>
        s.settlementId && !open.has(s.settlementId) ? [s.settlementId] : [],
      );
      // Rare (a settle judged while it ran): which of them are final rows,
      // and which no row at all (an id that was never a settlement's).
      const decided =
        refused.length === 0
          ? new Set<string>()
          : new Set(
              (
                await this.sending
                  .selectFrom("settlements")
                  .select("id")
                  .where("id", "in", refused)
                  .execute()
              ).map((r) => r.id),
            );
      return sent.map((s) => {
        if (!s.settlementId || open.has(s.settlementId)) {
          return { status: "fulfilled", value: undefined } as const;
        }
        const reason = decided.has(s.settlementId)
          ? new SettlementDecidedError(s.settlementId)
          : new Error(`no settlement ${s.settlementId} to journal a transaction for`);
        return { status: "rejected", reason } as const;
      });
    }, opts);
    this.mined = new GroupCommit(async (mined) => {
      await journalMined(this.finishing, mined);
      return done(mined);
    }, opts);
    this.outcomes = new GroupCommit(async (writes) => {
      const answered = await this.writeOutcomes(writes);
      return writes.map((w) => ({ status: "fulfilled", value: answered.has(w.id) }) as const);
    }, opts);
    // Verifications ask for the records of the payments they check, and
    // whether their payers are cooling: the look-ups of concurrent
    // verifications share one statement.
    this.liveReads = new GroupCommit((reads) => this.readLive(reads), opts);
    // The success watcher and the reconciler ask for several settlements'
    // journals at a time: one statement reads them all.
    this.journalReads = new GroupCommit(async (ids) => {
      const byId = await this.readJournals(ids);
      return ids.map((id) => ({ status: "fulfilled", value: byId.get(id) ?? [] }) as const);
    }, opts);
  }

  /**
   * The live row of an authorization, if any, and, when `cooling` is given,
   * when its payer's own on-chain failure ended if later than `since` (as
   * `payerFailedSince`), read together with the look-ups of concurrent
   * callers: the verify path's one database read.
   */
  lookUpLive(
    authorizationKey: string,
    cooling?: { network: string; payer: string | undefined; since: Date },
  ): Promise<LiveLookup> {
    const payer = cooling ? storablePayer(cooling.network, cooling.payer) : null;
    return this.liveReads.submit({
      key: authorizationKey,
      ...(payer && cooling ? { payer, since: cooling.since } : {}),
    });
  }

  private async readLive(
    reads: readonly LiveRead[],
  ): Promise<readonly PromiseSettledResult<LiveLookup>[]> {
    const keys = [...new Set(reads.map((r) => r.key))];
    const checked = reads.filter((r) => r.payer !== undefined);
    const live = this.db
      .selectFrom("settlements")
      .selectAll()
      .where("authorization_key", "in", keys)
      .where(HOLDS_AUTHORIZATION);
    const rows: SettlementRow[] = [];
    const lastFailure = new Map<string, Date>();
    if (checked.length === 0) {
      rows.push(...(await live.execute()));
    } else {
      // One statement answers both: the live rows, and beside them (a full
      // join that never matches) each checked payer's latest failure of its
      // own since the earliest `since` asked; each caller compares it with
      // its own.
      const since = new Date(Math.min(...checked.map((r) => r.since!.getTime())));
      const payers = [...new Set(checked.map((r) => r.payer!))];
      const found = await this.db
        .with("live", () => live)
        .with("cooling", (db) =>
          db
            .selectFrom("settlements")
            .select((eb) => ["payer", eb.fn.max("finished_at").as("last")])
            .where("payer", "in", payers)
            .where("status", "=", "failed")
            .where("transaction", "is not", null)
            .where("failure_cause", "=", "payer")
            .where("finished_at", ">", since)
            .groupBy("payer"),
        )
        .selectFrom("live")
        .fullJoin("cooling", (join) => join.on(sql<boolean>`false`))
        .selectAll("live")
        .select(["cooling.payer as cooling_payer", "cooling.last as cooling_last"])
        .execute();
      for (const { cooling_payer, cooling_last, ...row } of found) {
        if (cooling_payer !== null && cooling_last !== null) {
          lastFailure.set(cooling_payer, new Date(cooling_last as unknown as string));
        } else {
          rows.push(row as SettlementRow);
        }
      }
    }
    const byKey = new Map(rows.map((r) => [r.authorization_key, r]));
    return reads.map((r) => {
      const last = r.payer !== undefined ? lastFailure.get(r.payer) : undefined;
      return {
        status: "fulfilled",
        value: {
          row: byKey.get(r.key),
          payerFailedAt: last && last > r.since! ? last : undefined,
        },
      } as const;
    });
  }

  /** The live row (pending, or succeeded with a transaction) of an authorization, if any. */
  async findLive(authorizationKey: string): Promise<SettlementRow | undefined> {
    try {
      return await this.db
        .selectFrom("settlements")
        .selectAll()
        .where("authorization_key", "=", authorizationKey)
        .where(HOLDS_AUTHORIZATION)
        .executeTakeFirst();
    } catch (e) {
      this.log.error({ err: describeError(e) }, "could not read settlement records");
      throw new ServiceError(
        "service_unavailable",
        "the settlement records could not be read, so nothing was attempted; retry shortly",
        { retryable: true, cause: e },
      );
    }
  }

  /**
   * Lets a succeeded row of a repeatable operation (see
   * `InspectedPayment.repeatable`) stop holding its key, so the next run of
   * the same payload is recorded on its own row. The key keeps its row's id
   * appended: the row stays readable, and no two rows ever share a key.
   */
  async retireKey(id: string): Promise<void> {
    try {
      await this.db
        .updateTable("settlements")
        .set({ authorization_key: sql<string>`authorization_key || '#' || id::text` })
        .where("id", "=", id)
        .where("status", "=", "succeeded")
        .execute();
    } catch (e) {
      this.log.error({ err: describeError(e) }, "could not write settlement records");
      throw new ServiceError(
        "service_unavailable",
        "the settlement records could not be written, so nothing was attempted; retry shortly",
        { retryable: true, cause: e },
      );
    }
  }

  async get(id: string): Promise<SettlementRow | undefined> {
    return this.db.selectFrom("settlements").selectAll().where("id", "=", id).executeTakeFirst();
  }

  /**
   * Writes the intent row. Returns its id, or undefined when a live row for
   * the same authorization exists (that record decides the caller's answer). Fails closed:
   * if it cannot be written, nothing is settled.
   */
  async begin(intent: SettleIntent): Promise<string | undefined> {
    const { principal, request } = intent;
    const id = randomUUID();
    const req = request.paymentRequirements;
    try {
      const inserted = await this.intents.submit({
        id,
        account_id: principal.accountId,
        api_key_id: principal.keyId,
        network: req.network,
        scheme: req.scheme,
        payer: storablePayer(req.network, intent.payer),
        pay_to: storedSpelling(req.network, req.payTo),
        asset: storedSpelling(req.network, req.asset),
        amount: req.amount,
        payload_fingerprint: paymentFingerprint(request),
        status: "pending",
        transaction: null,
        error_reason: null,
        error_message: null,
        started_at: new Date(),
        finished_at: null,
        duration_ms: null,
        request: JSON.stringify(request),
        units: intent.units,
        authorization_key: intent.authorizationKey,
      });
      return inserted ? id : undefined;
    } catch (e) {
      this.log.error({ err: describeError(e) }, "could not record settlement intent");
      throw new ServiceError(
        "service_unavailable",
        "the settlement could not be recorded, so it was not attempted; retry shortly",
        { retryable: true, cause: e },
      );
    }
  }

  /**
   * Journals a transaction before it is broadcast; the settlement's row
   * learns the first one's reference in the same statement. Throws
   * `SettlementDecidedError`, and journals nothing, when the settlement was
   * already recorded failed: it must not be broadcast.
   */
  async recordSent(entry: JournalEntry, settlementId: string | undefined): Promise<void> {
    await this.sent.submit({ entry, settlementId });
  }

  /**
   * Gives back a settle's quota reservation that no outcome's write took
   * (the settle threw, or the database refused the outcome). Best effort:
   * a lost release leaves units reserved until the month ends, logged.
   */
  async giveBack(reservation: QuotaReservation, settlementId: string): Promise<void> {
    if (!this.metering) return;
    try {
      await this.db
        .transaction()
        .execute((trx) => this.metering!.chargeAndReleaseIn(trx, [], [reservation]));
    } catch (e) {
      this.log.error(
        { err: describeError(e), settlementId },
        "could not give back a quota reservation",
      );
    }
  }

  /** The chain's final word on a journaled transaction. */
  async recordFinished(
    reference: string,
    status: "success" | "reverted",
    block?: bigint,
    fee?: bigint,
  ): Promise<void> {
    await this.mined.submit({ reference, status, block, fee });
  }

  /**
   * The chain's word on a transaction could not be journaled while its
   * settlement's outcome (the record that answers) was written: its entry
   * stays `sent`, which counts its worst fee against the failed-fee budget
   * until its hour is over.
   */
  journalWriteLost(reference: string, e: unknown): void {
    this.log.error(
      { err: String(e), transaction: reference },
      "could not journal a transaction's outcome; its settlement's outcome is recorded",
    );
  }

  /** A pending row with its journaled transactions, as the chain families reconcile it. */
  async pendingSettlement(row: SettlementRow): Promise<PendingSettlement> {
    const txs = await this.journalReads.submit(row.id);
    return {
      id: row.id,
      network: row.network,
      request: row.request as PaymentRequest,
      transactions: txs.map((t) => ({
        network: row.network,
        reference: t.reference,
        ...(t.signer ? { signer: t.signer } : {}),
        ...(t.replaces ? { replaces: t.replaces } : {}),
        detail: (typeof t.detail === "string" ? JSON.parse(t.detail) : t.detail) as Record<
          string,
          unknown
        >,
      })),
    };
  }

  /** The journaled transactions of each settlement, oldest first. */
  private async readJournals(ids: readonly string[]): Promise<Map<string, JournaledTransaction[]>> {
    const rows = await this.db
      .selectFrom("settlement_transactions")
      .select(["settlement_id", "reference", "signer", "replaces", "detail"])
      .where("settlement_id", "in", [...new Set(ids)])
      .orderBy("created_at")
      .execute();
    const byId = new Map<string, JournaledTransaction[]>();
    for (const r of rows) {
      if (r.settlement_id === null) continue;
      const list = byId.get(r.settlement_id) ?? [];
      list.push(r);
      byId.set(r.settlement_id, list);
    }
    return byId;
  }

  /**
   * Settlements that succeeded with a transaction since `since`, newest
   * first (a reorg takes the newest blocks first): the ones a reorg could
   * still take back.
   */
  async recentSuccesses(
    since: Date,
    limit: number,
    /** The last row of the page before: this page holds the ones older than it. */
    after?: { finished_at: Date | null; id: string },
    /** Only these networks' (absent: every network's; never empty). */
    networks?: readonly string[],
  ): Promise<SettlementRow[]> {
    return recentSuccessesQuery(this.db, since, limit, after, networks).execute();
  }

  /**
   * For the transactions of `network` journaled since `since`, by every
   * replica: what failed ones cost their senders (every mined transaction
   * of a settlement recorded failed, a reverted one of any), and what those
   * still in flight could cost at most (a version a fee bump replaced
   * counts through its replacement only); in all, and per submitting
   * account, with when the oldest failed one was journaled.
   */
  async failedFeeExposure(network: string, since: Date): Promise<FailedFeeExposure> {
    const { rows } = await sql<{
      account_id: string | null;
      failed: string | null;
      in_flight: string | null;
      oldest: Date | string | null;
    }>`
      select s.account_id,
        sum(t.fee) filter (where t.status = 'reverted'
          or (t.status = 'success' and s.status = 'failed')) as failed,
        sum(t.worst_fee) filter (where t.status = 'sent' and not exists (
          select 1 from settlement_transactions r where r.replaces = t.reference)) as in_flight,
        min(t.created_at) filter (where t.status = 'reverted'
          or (t.status = 'success' and s.status = 'failed')) as oldest
      from settlement_transactions t
      left join settlements s on s.id = t.settlement_id
      where t.network = ${network} and t.created_at >= ${since}
      group by s.account_id`.execute(this.db);
    const accounts = new Map<string, { failed: bigint; inFlight: bigint }>();
    const figures: FailedFeeExposure & { accounts: typeof accounts } = {
      reverted: 0n,
      inFlight: 0n,
      accounts,
    };
    for (const row of rows) {
      const failed = BigInt(row.failed ?? 0);
      const inFlight = BigInt(row.in_flight ?? 0);
      figures.reverted += failed;
      figures.inFlight += inFlight;
      if (row.account_id) figures.accounts.set(row.account_id, { failed, inFlight });
      const oldest = row.oldest === null ? undefined : new Date(row.oldest);
      if (oldest && (!figures.oldestFailure || oldest < figures.oldestFailure)) {
        figures.oldestFailure = oldest;
      }
    }
    return figures;
  }

  /** Drops the signed bytes no reorg watch needs any more (see `dropSignedMaterial`). */
  async dropSignedMaterial(before: Date): Promise<void> {
    await dropSignedMaterial(this.db, before);
  }

  /**
   * A success the chain took back landed again in another transaction (the
   * same call re-sent at a new nonce): the row names the one on the chain
   * now. Guarded on the row still naming `previous`, so replicas that saw
   * it together write it once.
   */
  async relanded(id: string, previous: string, transaction: string): Promise<boolean> {
    const moved = await this.db
      .updateTable("settlements")
      .set({ transaction })
      .where("id", "=", id)
      .where("status", "=", "succeeded")
      .where("transaction", "=", previous)
      .executeTakeFirst();
    return Number(moved.numUpdatedRows) > 0;
  }

  /**
   * A success the chain took back (a reorg removed its transaction) whose
   * authorization can no longer land: recorded failed, with its
   * `settlement.failed` event, and its charge given back (its quota units,
   * and a pay-as-you-go amount to the prepaid balance). Guarded, so
   * replicas deciding it together write it once. Returns the row if this
   * call moved it.
   */
  async revokeSuccess(
    id: string,
    outcome: { reason: string; message: string },
    decidedOn: readonly JournalEntry[],
  ): Promise<SettlementRow | undefined> {
    return this.db.transaction().execute(async (trx) => {
      // Another replica's watcher may have sent it again meanwhile.
      if (!(await this.lockIfJournalIs(trx, id, "succeeded", decidedOn))) return undefined;
      const row = await trx
        .updateTable("settlements")
        .set({
          status: "failed",
          error_reason: outcome.reason,
          error_message: outcome.message,
          billed: false,
        })
        .where("id", "=", id)
        .where("status", "=", "succeeded")
        .returningAll()
        .executeTakeFirst();
      if (!row) return undefined;
      await recordSettlementEvents(trx, [row]);
      await this.metering?.revokeChargeIn(trx, row);
      return row;
    });
  }

  /** Pending rows at least as old as `olderThan` (they have lost their owner), oldest first. */
  async orphaned(olderThan: Date, limit: number): Promise<SettlementRow[]> {
    return this.db
      .selectFrom("settlements")
      .selectAll()
      .where("status", "=", "pending")
      .where("started_at", "<=", olderThan)
      .orderBy("started_at")
      .limit(limit)
      .execute();
  }

  /**
   * Per network, the settlements still `pending` that started at or before
   * `olderThan`: how many, and when the oldest started (the metrics of
   * settlements stuck past the reconciler's horizon). Reads the partial
   * index of pending rows only.
   */
  async pendingStartedBefore(
    olderThan: Date,
  ): Promise<{ network: string; count: number; oldest: Date }[]> {
    const rows = await this.db
      .selectFrom("settlements")
      .select(["network"])
      .select(sql<number>`count(*)::int`.as("count"))
      .select(sql<Date>`min(started_at)`.as("oldest"))
      .where("status", "=", "pending")
      .where("started_at", "<=", olderThan)
      .groupBy("network")
      .execute();
    return rows.map((r) => ({ network: r.network, count: r.count, oldest: new Date(r.oldest) }));
  }

  /**
   * Removes an intent row whose settlement was refused before anything was
   * sent (quota): like any request refused with 402, it leaves no record.
   */
  async withdraw(id: string): Promise<void> {
    await this.db
      .deleteFrom("settlements")
      .where("id", "=", id)
      .where("status", "=", "pending")
      .where("transaction", "is", null)
      .execute();
  }

  /** A duplicate request was answered by this row. Best effort: the answer stands. */
  async countAttempt(id: string): Promise<void> {
    await this.db
      .updateTable("settlements")
      .set({ attempts: sql<number>`attempts + 1` })
      .where("id", "=", id)
      .execute()
      .catch((e: unknown) =>
        this.log.warn({ err: describeError(e), settlementId: id }, "could not count an attempt"),
      );
  }

  /**
   * Finishes the row with the mechanism's outcome and gives the settle's
   * quota reservation back (a success is charged by the transition itself). A
   * success is recorded as answered to `requestId`, unless another request
   * already holds that answer (then `successAnswered` is false and the
   * caller must not answer success). Retries briefly; a row it cannot
   * finish stays pending for reconciliation (`recorded` false).
   */
  async finish(
    id: string,
    result: SettleResponse,
    startedAt: number,
    requestId: string = randomUUID(),
    reservation?: QuotaReservation,
  ): Promise<FinishOutcome> {
    const pending = !result.success && result.errorReason === "settlement_pending";
    return this.transition(
      id,
      {
        status: result.success ? "succeeded" : pending ? "pending" : "failed",
        transaction: result.transaction || null,
        errorReason: result.success ? null : (result.errorReason ?? null),
        errorMessage: result.success ? null : (result.errorMessage ?? null),
        payer: storablePayer(result.network, result.payer),
        settledAmount: result.success && result.amount !== undefined ? String(result.amount) : null,
        answeredTo: result.success ? requestId : null,
      },
      startedAt,
      reservation,
    );
  }

  /**
   * Records `requestId` as the one request answered `success: true` for a
   * succeeded row that no request was answered for yet (its settle could
   * only say `settlement_pending`, or its process died). True for exactly
   * one caller, whichever replica it runs on.
   */
  async claimSuccessAnswer(id: string, requestId: string): Promise<boolean> {
    const claimed = await this.db
      .updateTable("settlements")
      .set({ success_answered_at: new Date(), success_request_id: requestId })
      .where("id", "=", id)
      .where("status", "=", "succeeded")
      .where("success_answered_at", "is", null)
      .returning("id")
      .executeTakeFirst();
    return claimed !== undefined;
  }

  /**
   * Locks a row in `status` whose journal holds nothing beyond `decidedOn`;
   * false (nothing locked) otherwise. The journal's writes lock the same
   * row before they add to it (journalSent), so once this holds the lock,
   * the read below sees every entry that will ever precede this decision,
   * and a send after it is refused.
   */
  private async lockIfJournalIs(
    trx: Transaction<Database>,
    id: string,
    status: "pending" | "succeeded",
    decidedOn: readonly JournalEntry[],
  ): Promise<boolean> {
    const locked = await trx
      .selectFrom("settlements")
      .select("id")
      .where("id", "=", id)
      .where("status", "=", status)
      .forUpdate()
      .executeTakeFirst();
    if (!locked) return false;
    const known = new Set(decidedOn.map((t) => t.reference));
    const journaled = await trx
      .selectFrom("settlement_transactions")
      .select("reference")
      .where("settlement_id", "=", id)
      .execute();
    return journaled.every((t) => known.has(t.reference));
  }

  /**
   * Names who caused the on-chain failure a pending row is about to be
   * finished with, when something was sent for it (the journal set its
   * transaction): `cause` reads the chain only then. Written while the row
   * is still pending, so no failure limit ever counts it against the wrong
   * party. Best effort: a row left without a cause is charged to the
   * account, as before causes were told apart.
   */
  async attributeFailure(
    id: string,
    cause: (transaction: string) => Promise<FailureCause>,
  ): Promise<void> {
    try {
      const row = await this.db
        .selectFrom("settlements")
        .select("transaction")
        .where("id", "=", id)
        .where("status", "=", "pending")
        .executeTakeFirst();
      if (!row?.transaction) return;
      await this.db
        .updateTable("settlements")
        .set({ failure_cause: await cause(row.transaction) })
        .where("id", "=", id)
        .where("status", "=", "pending")
        .execute();
    } catch (e) {
      this.log.warn({ err: describeError(e), settlementId: id }, "could not attribute a failure");
    }
  }

  /**
   * Nothing was sent because the chain or a store could not be reached:
   * nobody's fault. The reservation, if any, is given back with it.
   */
  async notAttempted(
    id: string,
    message: string,
    startedAt: number,
    reservation?: QuotaReservation,
  ): Promise<FinishOutcome> {
    return this.transition(
      id,
      {
        status: "not_attempted",
        transaction: null,
        errorReason: "service_unavailable",
        errorMessage: message,
        payer: null,
        settledAmount: null,
        answeredTo: null,
      },
      startedAt,
      reservation,
    );
  }

  /**
   * Records what the chain says became of a pending row (the reconciler, or
   * a retry that asked the chain). Returns the row if this call moved it.
   *
   * `decidedOn` is the journal the outcome was judged from. A settle still
   * running (slower than the reconciler's horizon) may journal a send after
   * that read: the outcome would then be about a journal that is no longer
   * the row's (say "nothing was sent" while a transfer is on its way), so
   * it is not written, and the row is judged again later.
   */
  async finishFromChain(
    id: string,
    outcome: ChainOutcome,
    decidedOn: readonly JournalEntry[],
  ): Promise<SettlementRow | undefined> {
    return this.db.transaction().execute(async (trx) => {
      if (!(await this.lockIfJournalIs(trx, id, "pending", decidedOn))) return undefined;
      const row = await trx
        .updateTable("settlements as s")
        .set({
          request: REDACTED_REQUEST as never,
          status: outcome.status,
          ...(outcome.transaction ? { transaction: outcome.transaction } : {}),
          error_reason: outcome.status === "failed" ? outcome.reason : null,
          error_message: outcome.status === "failed" ? outcome.message : null,
          // A payer's failure decided here is kept off the account's failure
          // limit, as it is when the settle itself saw it.
          ...(outcome.status === "failed" && outcome.cause ? { failure_cause: outcome.cause } : {}),
          finished_at: new Date(),
          duration_ms: sql<number>`(extract(epoch from now() - started_at) * 1000)::int`,
        })
        .where("id", "=", id)
        .where("status", "=", "pending")
        .returningAll()
        .executeTakeFirst();
      if (row) await this.afterTransitions(trx, [row]);
      return row;
    });
  }

  /**
   * Writes an outcome over a pending row, with the reservation it gives
   * back; not recorded (after a few tries), the reservation is not given
   * back either, and stays its settle's to release.
   */
  private async transition(
    id: string,
    outcome: Outcome,
    startedAt: number,
    reservation: QuotaReservation | undefined,
  ): Promise<FinishOutcome> {
    for (let attempt = 1; ; attempt++) {
      try {
        const successAnswered = await this.outcomes.submit({ id, outcome, startedAt, reservation });
        return { recorded: true, successAnswered };
      } catch (e) {
        if (attempt >= 3) {
          this.log.error(
            { err: describeError(e), settlementId: id, tx: outcome.transaction },
            "could not record settlement outcome",
          );
          return { recorded: false, successAnswered: false };
        }
        await new Promise((r) => setTimeout(r, 50 * attempt));
      }
    }
  }

  /**
   * One flush of outcomes, in one transaction: the guarded transitions, then
   * the outbox events and quota charges of the rows that moved, and the
   * reservations given back. Returns the ids whose success answer the
   * writing request now holds.
   */
  private async writeOutcomes(writes: readonly OutcomeWrite[]): Promise<Set<string>> {
    const now = new Date();
    return this.finishing.transaction().execute(async (trx) => {
      // Guarded: a retry or the reconciler may have learned the outcome
      // from the chain first; that answer stands and is not rewritten.
      const moved = await transitionRows(
        trx,
        writes.map((w) => ({
          id: w.id,
          ...w.outcome,
          finishedAt: now,
          durationMs: now.getTime() - w.startedAt,
        })),
        { markBilled: this.metering !== undefined },
      );
      await this.afterTransitions(
        trx,
        moved,
        writes.flatMap((w) => (w.reservation ? [w.reservation] : [])),
        "marked",
      );
      const answered = new Set(
        moved.filter((r) => r.status === "succeeded" && r.success_request_id).map((r) => r.id),
      );
      // A success whose row was finished first by someone else (a retry or
      // the reconciler that read the chain): the answer is this request's
      // only if nobody was answered yet. Or this very write committed on an
      // earlier try whose acknowledgement was lost (the connection broke
      // after the commit): the answer it recorded is this request's still.
      const movedIds = new Set(moved.map((r) => r.id));
      const late = writes.filter((w) => w.outcome.answeredTo !== null && !movedIds.has(w.id));
      for (const w of late) {
        const claimed = await trx
          .updateTable("settlements")
          .set({ success_answered_at: now, success_request_id: w.outcome.answeredTo })
          .where("id", "=", w.id)
          .where("status", "=", "succeeded")
          .where((eb) =>
            eb.or([
              eb("success_answered_at", "is", null),
              eb("success_request_id", "=", w.outcome.answeredTo),
            ]),
          )
          .returning("id")
          .executeTakeFirst();
        if (claimed) answered.add(w.id);
      }
      return answered;
    });
  }

  /**
   * The outbox events and the quota charges that belong to rows' final
   * states, and the reservations their settles held, given back.
   * `billing`: "mark" finds the rows to bill and marks them here; "marked"
   * means the transition already marked them (transitionRows' markBilled),
   * and exactly those are charged, which saves a second write of each row.
   */
  private async afterTransitions(
    trx: Transaction<Database>,
    rows: readonly SettlementOutcomeRow[],
    reservations: readonly QuotaReservation[] = [],
    billing: "mark" | "marked" = "mark",
  ): Promise<void> {
    const final = rows.filter((r) => r.status !== "pending" && r.status !== "not_attempted");
    if (final.length > 0) await recordSettlementEvents(trx, final);
    if (!this.metering) return;
    // A success that sent nothing (an `upto` settled at zero) moved no money
    // and is not billed.
    const billable =
      billing === "marked"
        ? final.filter((r) => r.billed)
        : final.filter((r) => r.status === "succeeded" && r.transaction && !r.billed);
    if (billable.length === 0 && reservations.length === 0) return;
    await this.metering.chargeAndReleaseIn(
      trx,
      billable.map((r) => ({ accountId: r.account_id, units: r.units, settlementId: r.id })),
      reservations,
    );
    if (billable.length === 0 || billing === "marked") return;
    await trx
      .updateTable("settlements")
      .set({ billed: true })
      .where(
        "id",
        "in",
        billable.map((r) => r.id),
      )
      .execute();
  }
}

/**
 * The reorg watch's read (`SettlementRecorder.recentSuccesses`), answered
 * from the partial index of successes by the time they finished (0035):
 * the watch runs every few seconds, and the table holds every settlement
 * ever recorded.
 */
export function recentSuccessesQuery(
  db: Kysely<Database>,
  since: Date,
  limit: number,
  after?: { finished_at: Date | null; id: string },
  networks?: readonly string[],
) {
  let q = db
    .selectFrom("settlements")
    .selectAll()
    .where("status", "=", "succeeded")
    .where("transaction", "is not", null)
    .where("finished_at", ">=", since);
  if (networks) q = q.where("network", "in", networks);
  if (after?.finished_at) {
    q = q.where((eb) =>
      eb.or([
        eb("finished_at", "<", after.finished_at!),
        eb.and([eb("finished_at", "=", after.finished_at!), eb("id", "<", after.id)]),
      ]),
    );
  }
  return q.orderBy("finished_at", "desc").orderBy("id", "desc").limit(limit);
}
