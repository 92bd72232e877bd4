/**
 * What a mechanism's settle came to, as a decision table. The mechanism
 * answers (or throws), and the transaction layer notes in the settlement's
 * scope what it did meanwhile (see chains/settlementScope.ts): whether
 * anything was sent, a lost node answer, a send it refused, a journal
 * entry it could not write. Those together are one kind of report, found
 * by the first row of the table that holds, and each kind has one answer.
 *
 * The rows keep the settle's invariants: an outage is never the payer's
 * failure (503, nothing recorded against anyone); a payment that may still
 * land is never answered failed (`settlement_pending`, the row stays
 * pending for the reconciler); "nothing was charged" is said only when
 * nothing was sent.
 */
import type { SettleResponse } from "@x402/core/types";
import { ServiceError, describeError, isDatabaseUnavailable } from "../lib/errors.js";
import type { Logger } from "../lib/logger.js";
import { Reason } from "../protocol/reasons.js";
import { settlePending, settleRefusal } from "../protocol/answers.js";
import {
  ChainUnavailableError,
  FailedFeeBudgetSpentError,
  NothingSentError,
  type ChainFamily,
} from "../chains/ports.js";
import type { SettlementNotes } from "../chains/settlementScope.js";
import { assertChainAnswered, publicReason } from "./familyAnswers.js";
import { sanitizeMessage, splitReason } from "./sanitize.js";

/** The mechanism threw: what it threw, and the notes of what was sent. */
export interface Thrown {
  readonly error: unknown;
  readonly notes: SettlementNotes;
}

/** The mechanism answered: its answer, and the notes of what was sent. */
export interface Answered {
  readonly result: SettleResponse;
  readonly notes: SettlementNotes;
}

/** What an answer is built from besides the report. */
export interface ReportContext {
  readonly network: SettleResponse["network"];
  readonly payer: string | undefined;
  readonly family: ChainFamily | undefined;
  /** When the settle began: a failing RPC since then makes a refusal an outage. */
  readonly startedAt: number;
  readonly log: Logger;
}

type Row<R, K extends string> = readonly [kind: K, when: (report: R) => boolean];

// A transaction whose journal entry could not be written was not broadcast.
const nothingJournaled = (n: SettlementNotes) => n.journalFailed === true && !n.sent;
// The record was made final while the settle ran (the reconciler judged it
// interrupted), and the journal refused its first send.
const decidedWhileRunning = (n: SettlementNotes) => n.decidedWhileRunning === true && !n.sent;
// The failed-fee budget refused the payment's send, and nothing had been sent for it.
const budgetSpent = (n: SettlementNotes) => n.refusal?.retryAfterSeconds !== undefined && !n.sent;

/** When the mechanism threw; the first row that holds decides. */
const IF_THREW = [
  ["decided-while-running", (t) => decidedWhileRunning(t.notes)],
  ["nothing-journaled", (t) => nothingJournaled(t.notes)],
  ["budget-spent", (t) => budgetSpent(t.notes) && t.notes.ambiguousReference === undefined],
  ["chain-unreachable", (t) => t.error instanceof ChainUnavailableError && !t.notes.sent],
  ["answer-lost", (t) => t.notes.ambiguousReference !== undefined],
  // Something was sent, or the database failed under the settle (so what
  // was sent is not known here): "nothing was charged" could be false.
  ["outcome-unknown", (t) => t.notes.sent || isDatabaseUnavailable(t.error)],
  ["broke-unsent", () => true],
] as const satisfies readonly Row<Thrown, string>[];

/** When the mechanism answered; the first row that holds decides. */
const IF_ANSWERED = [
  ["decided-while-running", (a) => decidedWhileRunning(a.notes) && !a.result.transaction],
  ["nothing-journaled", (a) => nothingJournaled(a.notes) && !a.result.transaction],
  [
    "budget-spent",
    (a) =>
      !a.result.success &&
      budgetSpent(a.notes) &&
      !a.result.transaction &&
      a.notes.ambiguousReference === undefined,
  ],
  ["settled", (a) => a.result.success],
  ["answer-lost", (a) => a.notes.ambiguousReference !== undefined],
  ["refused", (a) => a.notes.refusal !== undefined],
  // Nothing sent and no transaction in the answer: a refusal reached while
  // the chain could not be read may be an outage.
  ["failed-unsent", (a) => !a.notes.sent && !a.result.transaction],
  ["failed", () => true],
] as const satisfies readonly Row<Answered, string>[];

type ThrownKind = (typeof IF_THREW)[number][0];
type AnsweredKind = (typeof IF_ANSWERED)[number][0];

const LOST_ANSWER = "the transaction was sent but the node's answer was lost; it is being followed";

/** The service's failed-fee budget is spent: nobody's fault, answered 503 with Retry-After. */
function budgetRefusal(notes: SettlementNotes, c: ReportContext): never {
  const refusal = notes.refusal!;
  // The same words as the refusal noted: whose share or which tier refused.
  throw new FailedFeeBudgetSpentError(c.network, refusal.retryAfterSeconds!, refusal.budgetScope);
}

/** Each kind's answer; an outage throws (the service answers it 503). */
const THROWN_ANSWERS: Record<ThrownKind, (t: Thrown, c: ReportContext) => SettleResponse> = {
  "decided-while-running": (_t, c) => interruptedWhileRunning(c),
  "nothing-journaled": () => {
    throw new NothingSentError("the settlement could not be journaled, so nothing was sent");
  },
  "budget-spent": (t, c) => budgetRefusal(t.notes, c),
  "chain-unreachable": (t) => {
    throw t.error;
  },
  // The mechanisms turn chain failures into results: the rows below are
  // something unexpected, and logged.
  "answer-lost": (t, c) => {
    logThrown(t, c);
    return lostAnswer(t.notes, c);
  },
  // The row stays pending for the reconciler, and the caller's retry gets
  // its outcome; the answer now is an outage to retry.
  "outcome-unknown": (t, c) => {
    logThrown(t, c);
    throw new ServiceError(
      "service_unavailable",
      "the settlement's outcome is not known yet; retry shortly to get it",
      { retryable: true, cause: t.error },
    );
  },
  // A mechanism that threw because the chain could not be read (an asset
  // check through a failing provider) met an outage, not a bad payment.
  "broke-unsent": (t, c) => {
    logThrown(t, c);
    assertChainAnswered(c.family, c.network, c.startedAt);
    return settleRefusal(
      {
        reason: Reason.unexpectedSettleError,
        message: "settlement could not be completed; nothing was charged",
        payer: c.payer,
      },
      c.network,
    );
  },
};

const ANSWERED_ANSWERS: Record<AnsweredKind, (a: Answered, c: ReportContext) => SettleResponse> = {
  "decided-while-running": (_a, c) => interruptedWhileRunning(c),
  "nothing-journaled": () => {
    throw new NothingSentError("the settlement could not be journaled, so nothing was sent");
  },
  "budget-spent": (a, c) => budgetRefusal(a.notes, c),
  settled: (a, c) => ({ ...a.result, network: c.network }),
  // Never report a payment that may still land as failed.
  "answer-lost": (a, c) => lostAnswer(a.notes, c),
  refused: (a, c) => failure(a, c),
  "failed-unsent": (a, c) => {
    assertChainAnswered(c.family, c.network, c.startedAt);
    return failure(a, c);
  },
  // A transaction in the answer was sent: its outcome stands.
  failed: (a, c) => failure(a, c),
};

/** The answer to a mechanism that threw, or throws the outage it was. */
export function answerThrown(thrown: Thrown, c: ReportContext): SettleResponse {
  return THROWN_ANSWERS[kindOf(IF_THREW, thrown)](thrown, c);
}

/** The answer to a mechanism's result, or throws the outage it was. */
export function answerResult(answered: Answered, c: ReportContext): SettleResponse {
  return ANSWERED_ANSWERS[kindOf(IF_ANSWERED, answered)](withMinedTransaction(answered), c);
}

/** The kind of the first row that holds (each table ends with one that always does). */
function kindOf<R, K extends string>(rows: readonly Row<R, K>[], report: R): K {
  for (const [kind, when] of rows) if (when(report)) return kind;
  throw new Error("a decision table must end with a row that always holds");
}

/**
 * A fee bump may have replaced the transaction the mechanism sent: the
 * answer names the one actually mined.
 */
function withMinedTransaction(a: Answered): Answered {
  const tx = a.result.transaction;
  const mined = tx ? a.notes.minedReplacements?.[tx.toLowerCase()] : undefined;
  return mined ? { ...a, result: { ...a.result, transaction: mined } } : a;
}

/** The record's own outcome, as a retry of this payment would be told it. */
function interruptedWhileRunning(c: ReportContext): SettleResponse {
  return settleRefusal(
    {
      reason: Reason.settlementInterrupted,
      message:
        "the settlement was recorded as interrupted while it ran (it outlived the reconciler's horizon), so nothing was sent; nothing was transferred",
      payer: c.payer,
    },
    c.network,
  );
}

function lostAnswer(notes: SettlementNotes, c: ReportContext): SettleResponse {
  return settlePending(notes.ambiguousReference ?? "", c.network, LOST_ANSWER, c.payer);
}

function logThrown(t: Thrown, c: ReportContext): void {
  c.log.error({ err: describeError(t.error), network: c.network }, "settle threw");
}

/** A failure answer: the transaction layer's refusal first, else the mechanism's reason. */
function failure({ result, notes }: Answered, c: ReportContext): SettleResponse {
  const reason = splitReason(result.errorReason ?? Reason.unexpectedSettleError);
  const payer = result.payer ?? c.payer;
  return {
    ...result,
    errorReason: notes.refusal?.reason ?? publicReason(c.family, reason.code),
    errorMessage: sanitizeMessage(notes.refusal?.message ?? result.errorMessage ?? reason.detail),
    transaction: result.errorReason === Reason.settlementPending ? result.transaction : "",
    network: c.network,
    ...(payer ? { payer } : {}),
  };
}
