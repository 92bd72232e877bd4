/**
 * Which settlement the current async work belongs to. The facilitator runs
 * each settle inside a scope; the transaction journal reads it to bind a
 * sent transaction to its settlement row, so mechanisms we do not own need
 * not carry the id through their calls. It carries the id only: outcomes
 * travel back as return values.
 */
import { AsyncLocalStorage } from "node:async_hooks";

const storage = new AsyncLocalStorage<{ settlementId: string }>();

export function runInSettlementScope<T>(settlementId: string, fn: () => Promise<T>): Promise<T> {
  return storage.run({ settlementId }, fn);
}

export function currentSettlementId(): string | undefined {
  return storage.getStore()?.settlementId || undefined;
}
