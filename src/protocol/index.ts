/**
 * The x402 protocol types this service speaks, in one place that every layer
 * may import (http, features, facilitator, chains): the body of /verify and
 * /settle, the version, and the shape of GET /supported.
 */
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";

export const X402_VERSION = 2;

/** The request body of /verify and /settle. */
export interface PaymentRequest {
  x402Version: number;
  paymentPayload: PaymentPayload;
  paymentRequirements: PaymentRequirements;
}

export interface SupportedResponse {
  kinds: {
    x402Version: number;
    scheme: string;
    network: string;
    extra?: Record<string, unknown>;
  }[];
  extensions: string[];
  signers: Record<string, string[]>;
  /** The assets each served network settles (anything else is `unsupported_asset`). */
  assets?: Record<string, { asset: string; symbol: string; decimals: number }[]>;
}

/**
 * A request as read once, at the service's edge, by the family that serves
 * its network: everything the service decides on before any chain call.
 */
export interface InspectedPayment {
  readonly request: PaymentRequest;
  /** The payer the payload names (unverified). */
  readonly payer: string | undefined;
  /** The same for every copy of one signed authorization; duplicates meet on it. */
  readonly authorizationKey: string;
  /** Quota units a success costs (0: never counted). */
  readonly units: number;
  /** The first malformed field of the payment, or undefined. */
  readonly shapeError: string | undefined;
  /** The reason a settle of this authorization, once consumed, is refused with. */
  readonly replayReason: string;
  /**
   * An operation anyone may run again with the same payload (a
   * batch-settlement `settle` of a receiver's claimed funds): it carries no
   * signed authorization to replay, so one that succeeded does not stop the
   * next; copies still meet while one is being settled.
   */
  readonly repeatable: boolean;
  /**
   * The key its mechanism keeps a transaction left pending under, in the
   * pending-settlement store (EVM: the payload's signature). The intent's
   * statement reads that row, so the mechanism's look-up costs no round trip.
   */
  readonly pendingKey?: string | undefined;
}
