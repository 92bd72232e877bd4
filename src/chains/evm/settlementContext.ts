/**
 * What the EVM transaction layer notes while one settlement's mechanism call
 * runs (a replacement mined, a lost broadcast answer, a refusal to send).
 * Internal to this family: the adapter's `runSettlement` opens a scope around
 * the call and returns the notes as a value; nothing outside reads the scope.
 */
import { AsyncLocalStorage } from "node:async_hooks";

export interface SettlementScope {
  /** The hash that was finally mined, if a fee bump replaced the original. */
  minedHash?: `0x${string}`;
  /** Set when the transaction layer refused to send, with a reason for the caller. */
  refusal?: { reason: string; message: string };
  /** A transaction whose broadcast answer was lost: the outcome is unknown. */
  ambiguousHash?: `0x${string}`;
  /** Set once a transaction for this settlement was journaled and handed to the node. */
  sent?: boolean;
}

const storage = new AsyncLocalStorage<SettlementScope>();

export function runInSettlement<T>(scope: SettlementScope, fn: () => Promise<T>): Promise<T> {
  return storage.run(scope, fn);
}

export function currentSettlement(): SettlementScope | undefined {
  return storage.getStore();
}
