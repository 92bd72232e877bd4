/**
 * What the one-delivery suite needs of a chain family: how to run its
 * ledger, how a resource server built with the official packages accepts
 * it, how a payer pays it, and how to read what the ledger holds. Adding a
 * family to the suite is one adapter in this folder and one line in
 * index.ts.
 */
import type { x402Client } from "@x402/core/client";
import type { x402ResourceServer } from "@x402/core/server";
import type { Network, PaymentPayload, PaymentRequirements, Price } from "@x402/core/types";
import type { StackOptions, TestStack } from "../support/stack.js";

export interface FamilyAdapter {
  /** Names the family in test titles. */
  readonly name: string;
  readonly network: Network;
  /** What `startStack` needs to run this family's ledger next to the service. */
  readonly stack: StackOptions;
  /** What a replay of a consumed authorization is refused with. */
  readonly replayReason: string;
  /** Registers the family's server scheme, as a resource server would. */
  registerServer(server: x402ResourceServer): x402ResourceServer;
  /** The recipient a route names: an account the ledger can credit. */
  payTo(stack: TestStack): string;
  /** A route's price of `atomic` units of the asset the family's route asks for. */
  price(atomic: bigint): Price;
  /** Payer `i`'s client, registered with the family's client scheme. */
  client(stack: TestStack, i: number): Promise<x402Client>;
  /** Payer `i`'s address as the family writes it. */
  payer(stack: TestStack, i: number): Promise<string>;
  /** What `address` holds of the asset the routes ask for, in atomic units. */
  balanceOf(stack: TestStack, address: string): Promise<bigint>;
  /**
   * A second payment by payer `i`, for `requirements`, signed with the
   * nonce `first` consumed. Absent where a family has no nonce a second
   * signed message can carry.
   */
  signReusingNonce?(
    stack: TestStack,
    i: number,
    first: PaymentPayload,
    requirements: PaymentRequirements,
  ): Promise<PaymentPayload>;
}

/** A dollar price for a six-decimal USDC amount, written exactly. */
export function usdcPrice(atomic: bigint): Price {
  const whole = atomic / 1_000_000n;
  const fraction = (atomic % 1_000_000n).toString().padStart(6, "0");
  return `$${whole}.${fraction}`;
}

/** The payload a client scheme's partial result becomes, as `x402Client` assembles it. */
export function assembled(
  first: PaymentPayload,
  requirements: PaymentRequirements,
  payload: Record<string, unknown>,
): PaymentPayload {
  return { ...first, accepted: requirements, payload };
}
