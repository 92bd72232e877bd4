/**
 * The settlement the current async work belongs to, and what the transaction
 * layer notes while it runs. The facilitator runs each settle inside one
 * scope; the transaction journal reads its id to bind a sent transaction to
 * its settlement row, and a family's transaction layer (and the journal)
 * writes its notes there (something was sent, a replacement was mined, an
 * answer was lost, a send was refused, the journal failed), so mechanisms we
 * do not own need carry neither through their calls. The facilitator reads
 * the notes once the mechanism returns.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { SettlementNotes } from "./ports.js";

export interface SettlementScope {
  readonly settlementId: string;
  readonly notes: SettlementNotes;
}

const storage = new AsyncLocalStorage<SettlementScope>();

export function runInSettlementScope<T>(scope: SettlementScope, fn: () => Promise<T>): Promise<T> {
  return storage.run(scope, fn);
}

/** The settlement running here, if any. */
export function currentSettlement(): SettlementScope | undefined {
  return storage.getStore();
}
