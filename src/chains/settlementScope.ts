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
import type { RoutedPayment, SettlementNotes } from "./ports.js";

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
