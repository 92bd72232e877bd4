/**
 * How a payment is identified in the settlement records: its fingerprints
 * (what the idempotency and duplicate checks compare) and the spelling a
 * payer is stored under (what payer cooling looks up).
 */
import { createHash } from "node:crypto";
import stringify from "safe-stable-stringify";
import { storedSpelling } from "../../chains/index.js";
import type { PaymentRequest } from "../../protocol/index.js";

/** Stable identity of a signed payment: the same payload always maps here. */
export function paymentFingerprint(req: PaymentRequest): string {
  const canonical = stringify(req.paymentPayload.payload) ?? "";
  return createHash("sha256").update(canonical).digest("hex");
}

/**
 * Stable identity of a signed payment together with what it was asked to
 * pay (network, scheme, asset, amount, recipient): two requests with the
 * same fingerprint ask for the same transfer.
 */
export function requestFingerprint(req: PaymentRequest): string {
  const r = req.paymentRequirements;
  const canonical =
    stringify({
      payload: req.paymentPayload.payload,
      network: r.network,
      scheme: r.scheme,
      asset: storedSpelling(r.network, r.asset),
      amount: r.amount,
      payTo: storedSpelling(r.network, r.payTo),
    }) ?? "";
  return createHash("sha256").update(canonical).digest("hex");
}

/**
 * A payer as the records store it (the network's stored spelling), or null
 * when it does not look like an address: the column is indexed and read by
 * payer cooling, so nothing else goes in.
 */
export function storablePayer(network: string, payer: string | undefined): string | null {
  return payer && /^[\x21-\x7e]{1,256}$/.test(payer) ? storedSpelling(network, payer) : null;
}
