/**
 * What a Solana `exact` payload says about itself before it is verified:
 * its shape, who pays, and which signed transaction it carries.
 *
 * The authorization key is the hash of the transaction message, the part
 * the payer signed: every copy of one signed payment maps to it, whichever
 * replica or resource server sends it, even before the fee payer signs.
 */
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import {
  decodeTransactionFromPayload,
  getTokenPayerFromTransaction,
  transactionMessageHash,
} from "@x402/svm";
import { getBase64Encoder, getTransactionDecoder } from "@solana/kit";

type Decoded = ReturnType<typeof decodeTransactionFromPayload>;

/** Decoded once per payload object: shape, payer and key all read it on one request. */
const decoded = new WeakMap<object, Decoded | undefined>();

function decode(payload: PaymentPayload): Decoded | undefined {
  const body = payload.payload as object | undefined;
  if (!body) return undefined;
  if (decoded.has(body)) return decoded.get(body);
  const tx = decodeOnce((body as Record<string, unknown>)["transaction"]);
  decoded.set(body, tx);
  return tx;
}

function decodeOnce(wire: unknown): Decoded | undefined {
  if (typeof wire !== "string") return undefined;
  try {
    // Checked with kit first: the official helper logs every decoding failure
    // to the console, and a malformed payload is the caller's 400, not news.
    getTransactionDecoder().decode(getBase64Encoder().encode(wire));
    return decodeTransactionFromPayload({ transaction: wire });
  } catch {
    return undefined;
  }
}

export function svmShapeError(payload: PaymentPayload): string | undefined {
  const body = payload.payload as Record<string, unknown>;
  const tx = body["transaction"];
  if (typeof tx !== "string" || tx.length === 0) {
    return "paymentPayload.payload.transaction must be the base64 wire form of a signed Solana transaction";
  }
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(tx) || tx.length > 8_000) {
    return "paymentPayload.payload.transaction must be base64 (at most one transaction, 1,232 bytes)";
  }
  if (!decode(payload)) {
    return "paymentPayload.payload.transaction does not decode as a Solana transaction";
  }
  return undefined;
}

export function svmPayerOf(payload: PaymentPayload): string | undefined {
  const tx = decode(payload);
  if (!tx) return undefined;
  try {
    return getTokenPayerFromTransaction(tx) || undefined;
  } catch {
    return undefined;
  }
}

export function svmAuthorizationKey(
  payload: PaymentPayload,
  requirements: PaymentRequirements,
): string | undefined {
  const tx = decode(payload);
  return tx ? `${requirements.network}:tx:${transactionMessageHash(tx)}` : undefined;
}
