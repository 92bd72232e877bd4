/**
 * Whether a signed XRPL transaction's `TxnSignature` verifies for its
 * `SigningPubKey`, as the `xrpl` package's `verifySignature` decides, with
 * the curve arithmetic done natively where it can be.
 *
 * Why: `verifySignature` checks with noble's curves in JavaScript, about
 * 2 ms a payment. Each settle checks one, and a burst of them (every worker
 * answered at one ledger close sends its next payment at once) held the
 * service's thread for hundreds of milliseconds at a time, while the answers
 * of that close waited behind them.
 *
 * How: the signing data is the `xrpl` package's own (`encodeForSigning`),
 * and:
 * - a secp256k1 key checks the DER signature over the first half of the
 *   SHA-512 of that data with libsecp256k1 (the `secp256k1` package), which,
 *   like the `xrpl` package, accepts only low-S signatures;
 * - an Ed25519 key checks the data with Node's crypto (OpenSSL, RFC 8032, as
 *   the `xrpl` package checks it with ZIP-215 off).
 *
 * Only an acceptance is taken from the native check. Anything else (a
 * refusal, a signature or key it cannot parse, an error) is decided by
 * `verifySignature` itself, so no payment is ever refused that the library
 * accepts, and the native path accepts only what passes the same curve
 * check over the same bytes.
 */
import { createHash, createPublicKey, verify as verifyNatively } from "node:crypto";
import secp256k1 from "secp256k1";
import { encodeForSigning, verifySignature } from "xrpl";

/** DER SubjectPublicKeyInfo header of a raw 32-byte Ed25519 public key. */
const ED25519_SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

/** The transaction's fields as decoded from its blob: what `encodeForSigning` takes. */
type DecodedTx = Parameters<typeof encodeForSigning>[0];

export function signatureVerifies(tx: DecodedTx, blob: string): boolean {
  try {
    if (nativeAccepts(tx)) return true;
  } catch {
    // Not a shape the native check reads: the library decides.
  }
  try {
    return verifySignature(blob);
  } catch {
    return false;
  }
}

/** True only when the native check accepts the signature (exported for its tests). */
export function nativeAccepts(tx: DecodedTx): boolean {
  const key = tx["SigningPubKey"];
  const signature = tx["TxnSignature"];
  if (typeof key !== "string" || typeof signature !== "string") return false;
  const data = Buffer.from(encodeForSigning(tx), "hex");
  const sig = Buffer.from(signature, "hex");
  if (/^ED[0-9A-F]{64}$/i.test(key)) {
    const publicKey = createPublicKey({
      key: Buffer.concat([ED25519_SPKI_PREFIX, Buffer.from(key.slice(2), "hex")]),
      format: "der",
      type: "spki",
    });
    return verifyNatively(null, data, publicKey, sig);
  }
  if (/^0[23][0-9A-F]{64}$/i.test(key)) {
    const compact = secp256k1.signatureImport(sig);
    // Only the one canonical DER form of (r, s) is taken here; any other
    // encoding of it is left to the library's own parser.
    if (!Buffer.from(secp256k1.signatureExport(compact)).equals(sig)) return false;
    const digest = createHash("sha512").update(data).digest().subarray(0, 32);
    return secp256k1.ecdsaVerify(compact, digest, Buffer.from(key, "hex"));
  }
  return false;
}
