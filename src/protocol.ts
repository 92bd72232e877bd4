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
}
