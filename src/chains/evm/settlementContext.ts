/**
 * Which settlement a transaction belongs to, carried through the mechanism
 * without threading arguments through code we do not own: the service runs
 * `x402Facilitator.settle` inside `runInSettlement`, and the signer reads it
 * when it signs and broadcasts.
 */
import { AsyncLocalStorage } from "node:async_hooks";

export interface SettlementScope {
  settlementId: string;
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
