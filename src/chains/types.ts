/**
 * The seam every chain family plugs into. A family registers its mechanisms
 * on the shared `x402Facilitator` and exposes the little the service needs
 * beyond that: which networks it serves, a last per-chain check of a payment
 * before the mechanism runs, and a way to shut down.
 */
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";

export type PreparedPayment =
  { ok: true; requirements: PaymentRequirements } | { ok: false; reason: string; message: string };

export interface ChainAdapter {
  /** CAIP-2 namespace, e.g. `eip155`. */
  readonly family: string;
  /** CAIP-2 ids served, with the schemes registered on each. */
  networks(): ReadonlyMap<string, readonly string[]>;
  /**
   * Checks and completes requirements with what only the chain knows (for
   * EVM: the token's EIP-712 domain). Never sends anything.
   */
  prepare(payload: PaymentPayload, requirements: PaymentRequirements): Promise<PreparedPayment>;
  /** A message naming the first malformed field of a scheme payload, or undefined. */
  shapeError(payload: PaymentPayload, requirements: PaymentRequirements): string | undefined;
  /** The latest block (or ledger) number, cached for a fraction of a block. */
  currentBlock(network: string): Promise<bigint | undefined>;
  close(): Promise<void>;
}
