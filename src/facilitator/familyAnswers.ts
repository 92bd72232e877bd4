/**
 * How a family's word is taken, for verify and settle alike: the reason it
 * gives is answered as the family says the service should name it, and a
 * refusal reached while the family's RPC was failing is not believed.
 */
import {
  ChainUnavailableError,
  type FamilyPaymentIdentity,
  type FamilyRuntime,
} from "../chains/ports.js";

/** The reason the service answers for a mechanism's (see FamilyPaymentIdentity.publicReason). */
export function publicReason(family: FamilyPaymentIdentity | undefined, reason: string): string {
  return family ? family.publicReason(reason) : reason;
}

/**
 * Throws `ChainUnavailableError` when the family's RPC failed since
 * `sinceMs` (see FamilyRuntime.rpcFailedSince): what was decided meanwhile
 * says nothing about the payment, so the caller retries (503).
 */
export function assertChainAnswered(
  family: FamilyRuntime | undefined,
  network: string,
  sinceMs: number,
): void {
  if (family?.rpcFailedSince(network, sinceMs)) {
    throw new ChainUnavailableError(
      network,
      `the ${network} RPC failed while this payment was checked; nothing was decided about it`,
    );
  }
}
