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
 * The settle path's writes (intents, outcomes, and through `journal` the
 * transactions' entries and receipts) go through group commit: concurrent
 * settlements share one flush, and each caller is answered only once its
 * flush is committed, so "intent before broadcast" and "outcome before
 * answer" hold for every one of them.
 *
 * Beside it, in rooms of their own: `journal` (journalRecords.ts, the
 * transaction journal's rows), `reads` (settlementReads.ts, what verify and
 * the workers read) and the payment's fingerprints (fingerprints.ts).
 */
import { randomUUID } from "node:crypto";
import { sql, type Transaction } from "kysely";
import type { SettleResponse } from "@x402/core/types";
import type {
  FailureCause,
  JournalEntry,
  PendingSettlement,
  ReconcileOutcome,
} from "../../chains/ports.js";
import { storedSpelling } from "../../chains/index.js";
import type { Db } from "../../storage/db.js";
import { DEFAULT_MAX_BATCH, GroupCommit } from "../../storage/groupCommit.js";
import type { Database, NewSettlement, SettlementRow } from "../../storage/schema.js";
import { ServiceError, describeError } from "../../lib/errors.js";
import type { Logger } from "../../lib/logger.js";
import type { PaymentRequest } from "../../protocol/index.js";
import type { ApiKeyPrincipal } from "../keys/authenticator.js";
import type { QuotaReservation } from "../plans/quotaLedger.js";
import { recordSettlementEvents } from "../webhooks/events.js";
import { paymentFingerprint, storablePayer } from "./fingerprints.js";
import { afterTransitions, type SettlementMetering } from "./transitionEffects.js";
import { JournalRecords } from "./journalRecords.js";
import { SettlementReads } from "./settlementReads.js";
import {
  writeIntents,
  REDACTED_REQUEST,
  type CheckedIntent,
  type IntentWritten,
  type MinedTransaction,
} from "./settlementWrites.js";
import { writeOutcomes, type Outcome, type OutcomeWrite } from "./outcomeWrites.js";

/** What writing an intent row found (see `SettlementRecorder.beginChecked`). */
export interface BeginOutcome extends Omit<IntentWritten, "written" | "reserved"> {
  /** The row's id; undefined when not written (a live record, or the payer cooling). */
  id: string | undefined;
  /** Its quota reservation, when the intent's statement granted it (see `SettleIntent.reserve`). */
  reservation?: QuotaReservation | undefined;
}

export interface SettleIntent {
  principal: ApiKeyPrincipal;
  request: PaymentRequest;
  authorizationKey: string;
  payer: string | undefined;
  units: number;
  /** See `InspectedPayment.pendingKey`. */
  pendingKey?: string | undefined;
  /**
   * Asks the quota reservation in the intent's own statement (metered
   * settles): granted there when it fits, and otherwise left to
   * QuotaLedger.reserve, which decides it exactly.
   */
  reserve?: boolean | undefined;
}

/** What the chain (or a retry that asked it) says became of a pending row: a decided reconciliation. */
export type ChainOutcome = Exclude<ReconcileOutcome, { status: "pending" }>;

/** What became of a settle's outcome write. */
export interface FinishOutcome {
  /** False when the outcome could not be written (the row stays pending for the reconciler). */
  recorded: boolean;
  /** For a success: whether this request holds the payment's one success answer. */
  successAnswered: boolean;
}

export class SettlementRecorder {
  private readonly intents: GroupCommit<CheckedIntent, IntentWritten>;
  private readonly outcomes: GroupCommit<OutcomeWrite, boolean>;
  /** The reads of the verify path and the workers. */
  readonly reads: SettlementReads;
  /** The transaction journal's rows, written in the same lanes as the outcomes. */
  readonly journal: JournalRecords;

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
    sending: Db = finishing,
  ) {
    this.reads = new SettlementReads(db, log);
    this.journal = new JournalRecords(db, log, finishing, sending);
    const opts = { maxBatch: DEFAULT_MAX_BATCH };
    this.intents = new GroupCommit(async (writes) => {
      const written = await writeIntents(this.db, writes, this.metering);
      return written.map((value) => ({ status: "fulfilled", value }) as const);
    }, opts);
    this.outcomes = new GroupCommit(async (writes) => {
      const answered = await writeOutcomes(
        { db: this.finishing, metering: this.metering, log: this.log },
        writes,
      );
      return writes.map((w) => ({ status: "fulfilled", value: answered.has(w.id) }) as const);
    }, opts);
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

  /**
   * Writes the intent row. Returns its id, or undefined when a live row for
   * the same authorization exists (that record decides the caller's answer). Fails closed:
   * if it cannot be written, nothing is settled.
   */
  async begin(intent: SettleIntent): Promise<string | undefined> {
    return (await this.beginChecked(intent)).id;
  }

  /**
   * `begin`, with the payer's history read in the same statement when
   * `coolingSince` is given (insertCheckedIntents): a payer whose own
   * failure ended after it gets no row, and `payerFailedAt` says when.
   */
  async beginChecked(intent: SettleIntent, coolingSince?: Date): Promise<BeginOutcome> {
    const { principal, request } = intent;
    const id = randomUUID();
    const req = request.paymentRequirements;
    try {
      const row: NewSettlement = {
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
      };
      const { written, reserved, ...payer } = await this.intents.submit({
        row,
        coolingSince,
        pendingKey: intent.pendingKey,
        reserve: intent.reserve,
      });
      const reservation =
        reserved && this.metering
          ? this.metering.reservationOf(
              principal.accountId,
              reserved.month,
              intent.units,
              reserved.plan,
            )
          : undefined;
      return { id: written ? id : undefined, reservation, ...payer };
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
    finished: readonly MinedTransaction[] = [],
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
      finished,
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
   * party. A cause journaled with the transaction's final word (read from
   * the chain when it became final) decides first, so every replica decides
   * alike; `cause` is asked only without one. Best effort: a row left
   * without a cause is charged to the account, as before causes were told
   * apart.
   */
  async attributeFailure(
    id: string,
    cause: (transaction: string) => Promise<FailureCause>,
  ): Promise<void> {
    try {
      const row = await this.db
        .selectFrom("settlements as s")
        .leftJoin("settlement_transactions as t", (join) =>
          join.onRef("t.reference", "=", "s.transaction").onRef("t.settlement_id", "=", "s.id"),
        )
        .select(["s.transaction", "t.failure_cause"])
        .where("s.id", "=", id)
        .where("s.status", "=", "pending")
        .executeTakeFirst();
      if (!row?.transaction) return;
      await this.db
        .updateTable("settlements")
        .set({ failure_cause: row.failure_cause ?? (await cause(row.transaction)) })
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
    finished: readonly MinedTransaction[] = [],
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
      finished,
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
    decidedOn: PendingSettlement["transactions"],
  ): Promise<SettlementRow | undefined> {
    const cause =
      outcome.status === "failed"
        ? (journaledCause(decidedOn, outcome) ?? outcome.cause)
        : undefined;
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
          // limit, as it is when the settle itself saw it. The cause journaled
          // with the failed transaction's final word comes first: whoever
          // decides, on whichever replica, decides the same.
          ...(cause ? { failure_cause: cause } : {}),
          finished_at: new Date(),
          duration_ms: sql<number>`(extract(epoch from now() - started_at) * 1000)::int`,
        })
        .where("id", "=", id)
        .where("status", "=", "pending")
        .returningAll()
        .executeTakeFirst();
      if (row) await afterTransitions(this.metering, trx, [row]);
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
    finished: readonly MinedTransaction[],
  ): Promise<FinishOutcome> {
    for (let attempt = 1; ; attempt++) {
      try {
        const successAnswered = await this.outcomes.submit({
          id,
          outcome,
          startedAt,
          reservation,
          finished,
        });
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
}

/** The cause journaled with the final word of the transaction a failed outcome names, if any. */
function journaledCause(
  decidedOn: PendingSettlement["transactions"],
  outcome: ChainOutcome,
): FailureCause | undefined {
  if (outcome.status !== "failed" || !outcome.transaction) return undefined;
  return decidedOn.find((t) => t.reference === outcome.transaction)?.cause;
}
