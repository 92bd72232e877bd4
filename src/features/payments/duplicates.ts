/**
 * What a payment that already has a record gets: one success answer per
 * payment, and the truth for every other request that presents it.
 *
 * A resource server delivers on every `success: true`, so a payment is
 * answered success once, to the request that settled it. Every other settle
 * of it answers `success: false` with an empty `transaction` (an empty hash
 * is what keeps the official resource servers from retrying) and sends
 * nothing:
 * - another account's request: `duplicate_settlement` (it never collects a
 *   payment it did not settle);
 * - another signed payment reusing the authorization's nonce, or a replay of
 *   a payment already answered success: the family's replay reason (on EVM
 *   the nonce-used reason the reference answers);
 * - a concurrent copy while the first request is still settling:
 *   `duplicate_settlement`.
 *
 * The one exception: a payment whose settle could only answer
 * `settlement_pending` (or whose process died before answering) is owed one
 * delivery. The first re-presentation of the same payment, by the same API
 * key, with the same requirements, follows the chain for it: `success: true`
 * once mined (recorded as the payment's one success answer, so exactly one
 * request gets it across retries and replicas), `settlement_pending` while
 * unmined, the failure if it never landed. The other exception,
 * `payment-identifier` replays, is the idempotency stage's.
 *
 * `/verify` reads the same record: a payment already answered success, or
 * settling for another account, is not valid; a payment owed to the asking
 * account is (so its client's re-sent request reaches the settle that
 * delivers it).
 */
import type { SettleResponse, VerifyResponse } from "@x402/core/types";
import { ServiceError, describeError } from "../../lib/errors.js";
import type { Logger } from "../../lib/logger.js";
import { Reason } from "../../protocol/reasons.js";
import type { InspectedPayment, PaymentRequest } from "../../protocol/index.js";
import { settlePending, settleRefusal, verifyRefusal } from "../../protocol/answers.js";
import type { SettlementRow } from "../../storage/schema.js";
import { storedSpelling } from "../../chains/index.js";
import { paymentFingerprint } from "../settlements/fingerprints.js";
import type { SettlementRecorder } from "../settlements/settlementRecorder.js";
import type { PaymentEngine } from "./engine.js";
import type { SettleContext } from "./stages/pipeline.js";

/**
 * Whether a record settles exactly this payment: the same signed payload,
 * asked to pay the same asset to the same recipient on the same network and
 * scheme (and, for a settle, the same amount: an `upto` verify names the
 * maximum, its settle the charge).
 */
function samePayment(
  row: SettlementRow,
  request: PaymentRequest,
  opts: { amount: boolean },
): boolean {
  const r = request.paymentRequirements;
  return (
    row.payload_fingerprint === paymentFingerprint(request) &&
    row.network === r.network &&
    row.scheme === r.scheme &&
    row.asset === storedSpelling(r.network, r.asset) &&
    row.pay_to === storedSpelling(r.network, r.payTo) &&
    (!opts.amount || row.amount === r.amount)
  );
}

const ANOTHER_ACCOUNT =
  "this signed payment was already submitted for settlement through another account; it is settled once, for that account";
const NONCE_REUSED =
  "another signed payment already uses this authorization (the same payer and nonce); this one cannot settle";
const ALREADY_ANSWERED =
  "this payment was already settled and answered as paid; a copy of it is not paid again";

/**
 * A verify's answer from the payment's record, or undefined when the record
 * says nothing and the chain's verdict stands.
 */
export function verdictFromRecord(
  row: SettlementRow | undefined,
  payment: InspectedPayment,
  accountId: string,
): VerifyResponse | undefined {
  if (!row) return undefined;
  const payer = payment.payer ?? row.payer ?? undefined;
  const invalid = (reason: string, message: string) => verifyRefusal({ reason, message, payer });
  // Another signed payment reusing the authorization is told so, whatever
  // became of the first; a copy of the first is a duplicate.
  if (!samePayment(row, payment.request, { amount: false })) {
    return invalid(payment.replayReason, NONCE_REUSED);
  }
  if (row.success_answered_at) return invalid(Reason.duplicateSettlement, ALREADY_ANSWERED);
  if (row.account_id !== accountId) return invalid(Reason.duplicateSettlement, ANOTHER_ACCOUNT);
  // Settling or settled for this account and not yet answered as paid: the
  // payer has paid (or will have), and is owed one delivery.
  return { isValid: true, ...(payer ? { payer } : {}) };
}

export interface DuplicateSettlesOptions {
  /** How long a re-presentation follows the chain before answering `settlement_pending`. */
  waitMs: number;
  /** A pending record older than this has no live owner (the reconciler's threshold). */
  ownerGoneAfterMs: number;
  pollMs?: number;
}

const MAX_ABANDONED = 10_000;

export class DuplicateSettles {
  /** The settles running in this process, by settlement id. */
  private readonly owners = new Set<string>();
  /**
   * Settles of this process that ended by throwing (an outage answered 503,
   * the outcome unknown) and may have left their record pending: nothing
   * of theirs runs any more, so a retry asks the chain at once instead of
   * waiting for an owner that is gone. The oldest are forgotten past a
   * bound; a forgotten one is only waited for as another process's.
   */
  private readonly abandoned = new Set<string>();

  constructor(
    private readonly engine: PaymentEngine,
    private readonly recorder: SettlementRecorder,
    private readonly log: Logger,
    private readonly opts: DuplicateSettlesOptions,
  ) {}

  /** Marks this process's settle of a record as running until its answer is known. */
  own(settlementId: string, answer: Promise<SettleResponse>): Promise<SettleResponse> {
    this.owners.add(settlementId);
    const forget = () => this.owners.delete(settlementId);
    const abandon = () => {
      forget();
      this.abandoned.add(settlementId);
      if (this.abandoned.size > MAX_ABANDONED) {
        this.abandoned.delete(this.abandoned.values().next().value!);
      }
    };
    answer.then(forget, abandon);
    return answer;
  }

  /**
   * The answer to a settle of a payment whose authorization already has a
   * live record, or undefined when the record was withdrawn before anything
   * was sent (its owner was refused its quota): the caller then settles the
   * payment itself.
   */
  async answer(ctx: SettleContext, row: SettlementRow): Promise<SettleResponse | undefined> {
    await this.recorder.countAttempt(row.id);
    const refuse = (reason: string, message: string) => refusal(ctx, row, reason, message);
    const replay = ctx.payment.replayReason;
    if (row.account_id !== ctx.principal.accountId) {
      return refuse(Reason.duplicateSettlement, ANOTHER_ACCOUNT);
    }
    if (!samePayment(row, ctx.request, { amount: true })) return refuse(replay, NONCE_REUSED);
    if (row.success_answered_at) return refuse(replay, ALREADY_ANSWERED);
    if (row.api_key_id !== ctx.principal.keyId) {
      return refuse(
        Reason.duplicateSettlement,
        "this payment is being settled through another API key of this account; that key gets its answer",
      );
    }
    if (row.status === "pending" && this.owners.has(row.id)) {
      return refuse(
        Reason.duplicateSettlement,
        "this payment is being settled by another request right now; that request gets its answer",
      );
    }
    if (row.status === "pending" && this.ownerIsRunning(row)) return this.awaitOwner(ctx, row);
    return this.follow(ctx, row);
  }

  /**
   * A copy of a payment another process is settling. That process may have
   * died with the request inside it, its answer lost with it: a copy refused
   * as a duplicate would then leave the payment paid and never answered as
   * paid. So the copy waits for the owner's outcome: the owner's answer
   * stands (the copy is told it was already answered, or the same failure),
   * and an owner that has not finished within the wait gets this copy
   * `settlement_pending`, whose retry follows the chain once the owner is
   * known to be gone.
   */
  private async awaitOwner(
    ctx: SettleContext,
    first: SettlementRow,
  ): Promise<SettleResponse | undefined> {
    const deadline = Date.now() + this.opts.waitMs;
    let row = first;
    while (row.status === "pending" && this.ownerIsRunning(row)) {
      if (Date.now() >= deadline) return pendingAnswer(ctx, row);
      await sleep(this.opts.pollMs ?? 200);
      const current = await this.recorder.reads.get(row.id);
      if (!current) return undefined;
      row = current;
    }
    if (row.success_answered_at) {
      return refusal(ctx, row, ctx.payment.replayReason, ALREADY_ANSWERED);
    }
    return this.follow(ctx, row);
  }

  /**
   * The re-presentation of a payment its first settle could not finish:
   * the record's outcome, learned from the chain when still open.
   */
  private async follow(
    ctx: SettleContext,
    first: SettlementRow,
  ): Promise<SettleResponse | undefined> {
    const deadline = Date.now() + this.opts.waitMs;
    let row = first;
    for (;;) {
      if (row.status === "succeeded") return this.deliver(ctx, row);
      if (row.status === "failed") return failure(ctx, row);
      if (row.status === "not_attempted") {
        throw new ServiceError(
          "service_unavailable",
          "the settlement of this payment could not be attempted (the chain or a store was unreachable); retry shortly",
          { retryable: true },
        );
      }
      const decided = await this.askChain(row);
      if (decided) {
        row = decided;
        continue;
      }
      if (Date.now() >= deadline) return pendingAnswer(ctx, row);
      await sleep(this.opts.pollMs ?? 200);
      const current = await this.recorder.reads.get(row.id);
      if (!current) return undefined;
      row = current;
    }
  }

  /** The success, if this request is the first to be answered it. */
  private async deliver(ctx: SettleContext, row: SettlementRow): Promise<SettleResponse> {
    if (!(await this.recorder.claimSuccessAnswer(row.id, ctx.requestId))) {
      return refusal(ctx, row, ctx.payment.replayReason, ALREADY_ANSWERED);
    }
    return {
      success: true,
      transaction: row.transaction ?? "",
      network: ctx.request.paymentRequirements.network,
      amount: row.settled_amount ?? row.amount,
      ...(payerOf(ctx, row) ? { payer: payerOf(ctx, row) } : {}),
    } as SettleResponse;
  }

  /** Whether the request that wrote the record may still be settling it. */
  private ownerIsRunning(row: SettlementRow): boolean {
    if (this.owners.has(row.id)) return true;
    if (row.finished_at !== null || this.abandoned.has(row.id)) return false;
    return new Date(row.started_at).getTime() >= Date.now() - this.opts.ownerGoneAfterMs;
  }

  /** The chain's word on a pending record, recorded; undefined while it is still open. */
  private async askChain(row: SettlementRow): Promise<SettlementRow | undefined> {
    try {
      const pending = await this.recorder.journal.pendingSettlement(row);
      const outcome = await this.engine.reconcile(pending);
      if (outcome.status === "pending") return undefined;
      await this.recorder.finishFromChain(row.id, outcome, pending.transactions);
      return this.recorder.reads.get(row.id);
    } catch (e) {
      // The chain or the database could not be asked: the record stays open.
      this.log.warn({ err: describeError(e), settlementId: row.id }, "could not ask the chain yet");
      return undefined;
    }
  }
}

function payerOf(ctx: SettleContext, row: SettlementRow): string | undefined {
  return ctx.payment.payer ?? row.payer ?? undefined;
}

function refusal(
  ctx: SettleContext,
  row: SettlementRow,
  reason: string,
  message: string,
): SettleResponse {
  return settleRefusal(
    { reason, message, payer: payerOf(ctx, row) },
    ctx.request.paymentRequirements.network,
  );
}

function pendingAnswer(ctx: SettleContext, row: SettlementRow): SettleResponse {
  return settlePending(
    row.transaction ?? "",
    ctx.request.paymentRequirements.network,
    "this payment's settlement is still being followed on the chain; retry the same payment to learn its outcome",
    payerOf(ctx, row),
  );
}

function failure(ctx: SettleContext, row: SettlementRow): SettleResponse {
  return refusal(
    ctx,
    row,
    row.error_reason ?? Reason.unexpectedSettleError,
    row.error_message ?? "the settlement failed",
  );
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
