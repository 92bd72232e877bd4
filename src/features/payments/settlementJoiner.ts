/**
 * Answers a settle request whose authorization already has a record: a
 * concurrent duplicate, a retry after `settlement_pending`, a replay. It
 * never sends anything; it learns the record's outcome and answers it.
 *
 * - Owner running in this process: wait for its answer.
 * - Record final (`succeeded`/`failed`): answer it at once.
 * - Record pending and its owner done (it answered `settlement_pending`, or
 *   died): ask the chain now, record what the chain says (billed once, one
 *   webhook), and answer it; past the time budget, `settlement_pending` again.
 * - Record pending and its owner alive on another replica: poll the record.
 *
 * The same payment through another account is not answered as paid: that
 * account did not settle it, and telling it "paid" would let a captured
 * payment buy a second resource.
 */
import type { SettleResponse } from "@x402/core/types";
import { ServiceError, describeError } from "../../lib/errors.js";
import type { Logger } from "../../lib/logger.js";
import { Reason } from "../../lib/reasons.js";
import type { SettlementRow } from "../../storage/schema.js";
import type { SettlementRecorder } from "../settlements/settlementRecorder.js";
import type { PaymentEngine } from "./engine.js";
import type { SettleContext } from "./stages/pipeline.js";

export interface SettlementJoinerOptions {
  /** How long a duplicate waits for an outcome before answering `settlement_pending`. */
  waitMs: number;
  /** A pending record older than this has no live owner (the reconciler's threshold). */
  ownerGoneAfterMs: number;
  pollMs?: number;
}

export class SettlementJoiner {
  private readonly owners = new Map<string, Promise<SettleResponse>>();

  constructor(
    private readonly engine: PaymentEngine,
    private readonly recorder: SettlementRecorder,
    private readonly log: Logger,
    private readonly opts: SettlementJoinerOptions,
  ) {}

  /** Registers this process's owner of a record while it runs. */
  own(settlementId: string, answer: Promise<SettleResponse>): Promise<SettleResponse> {
    this.owners.set(settlementId, answer);
    const forget = () => this.owners.delete(settlementId);
    answer.then(forget, forget);
    return answer;
  }

  /**
   * The record's answer for this request, or undefined when the record was
   * withdrawn before anything was sent (its owner was refused its quota):
   * the caller then settles the payment itself.
   */
  async join(ctx: SettleContext, row: SettlementRow): Promise<SettleResponse | undefined> {
    await this.recorder.countAttempt(row.id);
    const answer = await this.outcomeOf(row, ctx);
    if (!answer) return undefined;
    if (answer.success && row.account_id !== ctx.principal.accountId) {
      return {
        success: false,
        errorReason: Reason.duplicateSettlement,
        errorMessage:
          "this signed payment was already submitted for settlement through another account; it is settled once, for that account",
        transaction: "",
        network: ctx.request.paymentRequirements.network,
        ...(ctx.payer ? { payer: ctx.payer } : {}),
      } as SettleResponse;
    }
    return answer;
  }

  private async outcomeOf(
    row: SettlementRow,
    ctx: SettleContext,
  ): Promise<SettleResponse | undefined> {
    const deadline = Date.now() + this.opts.waitMs;
    const owner = this.owners.get(row.id);
    if (owner) {
      const settled = await Promise.race([
        owner.then(
          (r) => ({ r }),
          (e: unknown) => ({ e }),
        ),
        sleep(this.opts.waitMs).then(() => undefined),
      ]);
      if (settled && "r" in settled) return settled.r;
      if (settled && "e" in settled) {
        if (settled.e instanceof ServiceError) throw settled.e;
      }
    }
    for (;;) {
      const current = await this.recorder.get(row.id);
      if (!current) return undefined;
      if (current.status !== "pending") return this.answerOf(current, ctx);
      if (this.ownerIsDone(current)) {
        const decided = await this.askChain(current);
        if (decided) return this.answerOf(decided, ctx);
      }
      if (Date.now() >= deadline) return this.answerOf(current, ctx);
      await sleep(this.opts.pollMs ?? 200);
    }
  }

  private ownerIsDone(row: SettlementRow): boolean {
    if (this.owners.has(row.id)) return false;
    if (row.finished_at !== null) return true;
    return new Date(row.started_at).getTime() < Date.now() - this.opts.ownerGoneAfterMs;
  }

  /** The chain's word on a pending record, recorded; undefined while it is still open. */
  private async askChain(row: SettlementRow): Promise<SettlementRow | undefined> {
    try {
      const outcome = await this.engine.reconcile(await this.recorder.pendingSettlement(row));
      if (outcome.status === "pending") return undefined;
      await this.recorder.finishFromChain(row.id, outcome);
      return this.recorder.get(row.id);
    } catch (e) {
      // The chain or the database could not be asked: the record stays open.
      this.log.warn({ err: describeError(e), settlementId: row.id }, "could not ask the chain yet");
      return undefined;
    }
  }

  private answerOf(row: SettlementRow, ctx: SettleContext): SettleResponse {
    const network = ctx.request.paymentRequirements.network;
    const payer = row.payer ?? ctx.payer;
    const who = payer ? { payer } : {};
    if (row.status === "succeeded") {
      return {
        success: true,
        transaction: row.transaction ?? "",
        network,
        ...who,
      } as SettleResponse;
    }
    if (row.status === "pending") {
      return {
        success: false,
        errorReason: Reason.settlementPending,
        errorMessage:
          "this payment's settlement is still being followed on the chain; retry the same payment to learn its outcome",
        transaction: row.transaction ?? "",
        network,
        ...who,
      } as SettleResponse;
    }
    if (row.status === "not_attempted") {
      throw new ServiceError(
        "service_unavailable",
        "the settlement of this payment could not be attempted (the chain or a store was unreachable); retry shortly",
        { retryable: true },
      );
    }
    return {
      success: false,
      errorReason: row.error_reason ?? Reason.unexpectedSettleError,
      errorMessage: row.error_message ?? "the settlement failed",
      transaction: "",
      network,
      ...who,
    } as SettleResponse;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
