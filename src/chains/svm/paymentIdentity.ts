/**
 * What a Solana `exact` payload says about itself before it is verified:
 * its shape, who pays, and which signed transaction it carries.
 *
 * The authorization key is the hash of the transaction message, the part
 * the payer signed: every copy of one signed payment maps to it, whichever
 * replica or resource server sends it, even before the fee payer signs.
 */
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { getTokenPayerFromTransaction, transactionMessageHash } from "@x402/svm";
import { getBase64Encoder, getTransactionDecoder, type Transaction } from "@solana/kit";

// Built once: decoders hold no state between calls.
const TRANSACTION_DECODER = getTransactionDecoder();
const BASE64 = getBase64Encoder();

/** Decoded once per payload object: shape, payer and key all read it on one request. */
const decoded = new WeakMap<object, Transaction | undefined>();

function decode(payload: PaymentPayload): Transaction | undefined {
  const body = payload.payload as object | undefined;
  if (!body) return undefined;
  if (decoded.has(body)) return decoded.get(body);
  const tx = decodeOnce((body as Record<string, unknown>)["transaction"]);
  decoded.set(body, tx);
  return tx;
}

/**
 * The wire form decoded with kit, as the official `decodeTransactionFromPayload`
 * does (base64, then the transaction decoder), once: decoding is most of a
 * Solana verification's CPU outside the scheme, and the official helper also
 * logs every malformed payload to the console, which is the caller's 400,
 * not news.
 */
function decodeOnce(wire: unknown): Transaction | undefined {
  if (typeof wire !== "string") return undefined;
  try {
    return TRANSACTION_DECODER.decode(BASE64.encode(wire));
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
