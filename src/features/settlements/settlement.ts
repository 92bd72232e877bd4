/**
 * One settle's settlement, from its intent row to its outcome. The intent
 * stage opens it; the stages after it, the engine and the settlement scope
 * receive it. It holds what belongs to this settle alone, so nothing is
 * handed between stages by id:
 * - its row's id, the payment it settles (routed to its family at the
 *   edge), and when it started;
 * - its quota reservation, from its intent's statement (or, when that
 *   did not grant it, the quota stage) until the write that records its
 *   outcome gives it back (charging a success) in the same statement, or
 *   until `release` gives it back when the settle ended without one;
 * - what the transaction layer noted while the mechanism ran
 *   (chains/settlementScope.ts).
 * The settlements table is still written only by the recorder.
 */
import type { SettleResponse } from "@x402/core/types";
import type { FailureCause, RoutedPayment } from "../../chains/ports.js";
import type { FinishedTransaction, SettlementNotes } from "../../chains/settlementScope.js";
import type { SettlingPayment } from "../../chains/settlementScope.js";
import type { QuotaReservation } from "../plans/quotaLedger.js";
import type { ApiKeyPrincipal } from "../keys/authenticator.js";
import type { FinishOutcome, SettlementRecorder } from "./settlementRecorder.js";

export class Settlement implements SettlingPayment {
  readonly notes: SettlementNotes = { sent: false };
  private reservation: QuotaReservation | undefined;
  /** The chain's word on its transactions, left to the outcome's statement while the mechanism runs. */
  private journalFinished: FinishedTransaction[] = [];

  private constructor(
    readonly id: string,
    readonly payment: RoutedPayment,
    /** When its intent was written: the row's duration counts from here. */
    readonly startedAt: number,
    /** The request this settle answers: the one recorded when it answers a success. */
    private readonly requestId: string,
    private readonly rows: SettlementRecorder,
    /** The account that submitted it: its failures' fees count against its share. */
    readonly account: string,
    /** Whether its payer has a success on record (undefined: not read). */
    readonly payerKnown: boolean | undefined,
    /** Its pending-settlement store row, read with its intent (see SettlementScope). */
    readonly pendingSettlement: { key: string; transaction: string | undefined } | undefined,
  ) {
    this.notes.journalFinished = this.journalFinished;
  }

  /**
   * Writes the intent row and opens its settlement, or answers undefined
   * when the authorization already has a live record (that record decides
   * the answer). Throws 503 when the row could not be written: nothing is
   * settled without it.
   */
  static async open(
    rows: SettlementRecorder,
    intent: {
      principal: ApiKeyPrincipal;
      payment: RoutedPayment;
      /** Quota units a success costs. */
      units: number;
      requestId: string;
      /** See `SettleIntent.reserve`. */
      reserve?: boolean;
    },
  ): Promise<Settlement | undefined> {
    return (await Settlement.openChecked(rows, intent)).settlement;
  }

  /**
   * `open`, with the payer's history read in the intent's own statement
   * when `coolingSince` is given (SettlementRecorder.beginChecked): a payer
   * whose own on-chain failure ended after it gets no row, and
   * `payerFailedAt` says when; the settlement knows whether its payer has
   * a success on record.
   */
  static async openChecked(
    rows: SettlementRecorder,
    intent: Parameters<typeof Settlement.open>[1],
    coolingSince?: Date,
  ): Promise<{ settlement: Settlement | undefined; payerFailedAt: Date | undefined }> {
    const { principal, payment, units, requestId, reserve } = intent;
    const startedAt = Date.now();
    const begun = await rows.beginChecked(
      {
        principal,
        request: payment.request,
        authorizationKey: payment.authorizationKey,
        payer: payment.payer,
        units,
        pendingKey: payment.pendingKey,
        reserve,
      },
      coolingSince,
    );
    const settlement =
      begun.id === undefined
        ? undefined
        : new Settlement(
            begun.id,
            payment,
            startedAt,
            requestId,
            rows,
            principal.accountId,
            begun.payerKnown,
            begun.pending,
          );
    if (settlement && begun.reservation) settlement.hold(begun.reservation);
    return { settlement, payerFailedAt: begun.payerFailedAt };
  }

  /** The payer the mechanism verified, if the operation has one (the scope's, for the family). */
  get payer(): string | undefined {
    return this.payment.payer;
  }

  /** Takes custody of the settle's quota reservation until its outcome is written. */
  hold(reservation: QuotaReservation): void {
    this.reservation = reservation;
  }

  /** Whether it holds a quota reservation (granted with its intent, or by the quota stage). */
  get reserved(): boolean {
    return this.reservation !== undefined;
  }

  /**
   * Names who caused an on-chain failure, before the row is final (see
   * SettlementRecorder.attributeFailure).
   */
  attributeFailure(cause: (transaction: string) => Promise<FailureCause>): Promise<void> {
    return this.rows.attributeFailure(this.id, cause);
  }

  /**
   * Records the mechanism's outcome, with the chain's word on its
   * transactions, giving the reservation back in the same statement; a
   * reservation whose write failed stays held, for `release`.
   */
  async finish(result: SettleResponse): Promise<FinishOutcome> {
    this.mechanismEnded();
    const finished = this.takeJournalFinished();
    const written = await this.rows.finish(
      this.id,
      result,
      this.startedAt,
      this.requestId,
      this.reservation,
      finished,
    );
    if (written.recorded) this.reservation = undefined;
    else await this.rows.journal.recordAllFinished(finished);
    return written;
  }

  /**
   * The mechanism has returned or thrown: no outcome write will take the
   * chain's word from here on. Work still running in this settle's scope (a
   * receipt watched past a `settlement_pending` answer) then writes each
   * `finished` where it is called.
   */
  mechanismEnded(): void {
    delete this.notes.journalFinished;
  }

  /**
   * The mechanism threw and no outcome follows: the chain's word it
   * collected is written on its own (the reconciler decides the row).
   */
  async journalWithoutOutcome(): Promise<void> {
    this.mechanismEnded();
    await this.rows.journal.recordAllFinished(this.takeJournalFinished());
  }

  private takeJournalFinished(): FinishedTransaction[] {
    const finished = this.journalFinished;
    this.journalFinished = [];
    return finished;
  }

  /** Nothing was sent because the chain or a store could not be reached: nobody's fault. */
  async notAttempted(message: string): Promise<void> {
    this.mechanismEnded();
    const finished = this.takeJournalFinished();
    const written = await this.rows.notAttempted(
      this.id,
      message,
      this.startedAt,
      this.reservation,
      finished,
    );
    if (written.recorded) this.reservation = undefined;
    else await this.rows.journal.recordAllFinished(finished);
  }

  /** Refused before anything was sent (quota): the intent row leaves no record. */
  withdraw(): Promise<void> {
    return this.rows.withdraw(this.id);
  }

  /**
   * Gives back a reservation still held once the settle ended without an
   * outcome written (it threw, or the database refused the outcome).
   */
  async release(): Promise<void> {
    const reservation = this.reservation;
    this.reservation = undefined;
    if (reservation) await this.rows.giveBack(reservation, this.id);
  }
}
