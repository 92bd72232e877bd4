/**
 * How a family's word is taken, for verify and settle alike: the reason it
 * gives is answered as the family says the service should name it, and a
 * refusal reached while the family's RPC was failing is not believed.
 */
import { ChainUnavailableError, type ChainFamily } from "../chains/ports.js";

/** The reason the service answers for a mechanism's (see ChainFamily.publicReason). */
export function publicReason(family: ChainFamily | undefined, reason: string): string {
  return family?.publicReason?.(reason) ?? reason;
}

/**
 * Throws `ChainUnavailableError` when the family's RPC failed since
 * `sinceMs` (see ChainFamily.rpcFailedSince): what was decided meanwhile
 * says nothing about the payment, so the caller retries (503).
 */
export function assertChainAnswered(
  family: ChainFamily | undefined,
  network: string,
  sinceMs: number,
): void {
  if (family?.rpcFailedSince?.(network, sinceMs)) {
    throw new ChainUnavailableError(
      network,
      `the ${network} RPC failed while this payment was checked; nothing was decided about it`,
    );
  }
}
