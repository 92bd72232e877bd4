/**
 * The settlement the current async work belongs to. The engine runs each
 * settle inside the settlement's scope: the transaction journal reads its id
 * to bind a sent transaction to its settlement row, and a family's
 * transaction layer (and the journal) writes its notes there (something was
 * sent, a replacement was mined, an answer was lost, a send was refused, the
 * journal failed). The mechanisms we do not own own the call stack, so this
 * ambient channel is how what they send is reported without them carrying
 * it; the engine reads the notes once the mechanism returns.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { FailedFeeBudgetSpentError, FailureCause, RoutedPayment } from "./ports.js";

/** The chain's final word on one journaled transaction (`TransactionJournal.finished`). */
export interface FinishedTransaction {
  reference: string;
  status: "success" | "reverted";
  block?: bigint | undefined;
  fee?: bigint | undefined;
  cause?: FailureCause | undefined;
}

/**
 * What the transaction layer saw while a mechanism settled one payment,
 * written into the settlement's scope (settlementScope.ts).
 */
export interface SettlementNotes {
  /** Something was journaled and handed to the node for this settlement. */
  sent: boolean;
  /**
   * The reference finally mined for each sent one a replacement took the
   * place of, keyed by the original (lower-case): a settlement may send more
   * than its payment (a payer's gas funding), and only the payment's own
   * replacement may stand in for the payment's transaction.
   */
  minedReplacements?: Record<string, string>;
  /** Sent, but the node's answer was lost: the outcome is unknown, never a failure. */
  ambiguousReference?: string;
  /**
   * The transaction layer refused to send, with the reason to answer (gas
   * ceiling, no signer). With `retryAfterSeconds` (the failed-fee budget is
   * spent) and nothing sent, the settle is answered 503 with `Retry-After`.
   */
  refusal?: {
    reason: string;
    message: string;
    retryAfterSeconds?: number;
    /** A failed-fee budget's refusal: whose share or tier refused it (failedFeeBudget.ts). */
    budgetScope?: FailedFeeBudgetSpentError["scope"];
  };
  /** A transaction's journal entry could not be written, so it was not broadcast. */
  journalFailed?: boolean;
  /**
   * While the mechanism runs, in a settle that writes its outcome: the
   * chain's word on its transactions (`TransactionJournal.finished`), which
   * the outcome's own statement writes. Absent (no such settle, or its
   * mechanism has ended): each `finished` is written where it is called.
   */
  journalFinished?: FinishedTransaction[];
  /**
   * The journal refused a transaction because the settlement's record was
   * already final (judged interrupted while it ran), so it was not broadcast.
   */
  decidedWhileRunning?: boolean;
}

export interface SettlementScope {
  /** The settlement row's id. */
  readonly id: string;
  /**
   * The account that submitted it: a family's failed-fee budget counts its
   * failures against that account's share (failedFeeBudget.ts). Absent for
   * the service's own sends (a re-land of a reorged success).
   */
  readonly account?: string;
  /**
   * Whether its payer has a settlement that succeeded on record: as the
   * failed-fee budget runs low, payers without one are refused first.
   * Undefined: not read (treated as known, so nothing is refused for it).
   */
  readonly payerKnown?: boolean | undefined;
  /**
   * The payer the mechanism verified (the signer of the branch it
   * executes): a family reads what its address carries (EVM: code, which
   * decides a signature check's gas allowance and the budget's tier).
   * Absent for operations without a payer and the service's own sends.
   */
  readonly payer?: string | undefined;
  /**
   * The pending-settlement store's row for its payment, read in its intent's
   * statement (`InspectedPayment.pendingKey`): the store answers its look-up
   * of that key from here. Kept current by the store's own writes.
   */
  readonly pendingSettlement?: { key: string; transaction: string | undefined } | undefined;
  readonly notes: SettlementNotes;
}

const storage = new AsyncLocalStorage<SettlementScope>();

export function runInSettlementScope<T>(scope: SettlementScope, fn: () => Promise<T>): Promise<T> {
  return storage.run(scope, fn);
}

/**
 * Runs `fn` outside any settlement: for a signer's own housekeeping sent
 * while a settlement runs (a nonce gap's filler), which is not that
 * settlement's transaction and must not be refused with it.
 */
export function outsideSettlementScope<T>(fn: () => T): T {
  return storage.exit(fn);
}

/** The settlement running here, if any. */
export function currentSettlement(): SettlementScope | undefined {
  return storage.getStore();
}

/**
 * A payment being settled, as the engine receives it: the payment routed
 * to its family at the edge, and the scope its transactions are noted in.
 */
export interface SettlingPayment extends SettlementScope {
  readonly payment: RoutedPayment;
}
