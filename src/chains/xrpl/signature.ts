/**
 * Whether a signed XRPL transaction's `TxnSignature` verifies for its
 * `SigningPubKey`, as the `xrpl` package's `verifySignature` decides, with
 * a secp256k1 key's curve arithmetic done natively.
 *
 * Why: `verifySignature` checks with noble's curves in JavaScript, about
 * 2 ms a secp256k1 payment. Each settle checks one, and a burst of them (every worker
 * answered at one ledger close sends its next payment at once) held the
 * service's thread for hundreds of milliseconds at a time, while the answers
 * of that close waited behind them.
 *
 * How: the signing data is the `xrpl` package's own (`encodeForSigning`).
 * For a secp256k1 key, the DER signature (in its one canonical form) is
 * checked over the first half of the SHA-512 of that data with libsecp256k1
 * (the `secp256k1` package), which, like the `xrpl` package, accepts only
 * low-S signatures. Ed25519 keys are left to the library: OpenSSL's Ed25519
 * check does not refuse a small-order public key, so it accepts signatures
 * the library refuses (for the identity key, R the identity and S zero
 * verify any message), and the library refuses them as rippled must.
 *
 * Only an acceptance is taken from the native check. Anything else (a
 * refusal, a signature or key it cannot parse, an error) is decided by
 * `verifySignature` itself, so no payment is ever refused that the library
 * accepts, and the native path accepts only what passes the same curve
 * check over the same bytes.
 */
import { createHash } from "node:crypto";
import secp256k1 from "secp256k1";
import { encodeForSigning, verifySignature } from "xrpl";

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
  // Ed25519 keys (and anything else) are left to the library (see above).
  if (!/^0[23][0-9A-F]{64}$/i.test(key)) return false;
  const sig = Buffer.from(signature, "hex");
  const compact = secp256k1.signatureImport(sig);
  // Only the one canonical DER form of (r, s) is taken here; any other
  // encoding of it is left to the library's own parser.
  if (!Buffer.from(secp256k1.signatureExport(compact)).equals(sig)) return false;
  const data = Buffer.from(encodeForSigning(tx), "hex");
  const digest = createHash("sha512").update(data).digest().subarray(0, 32);
  return secp256k1.ecdsaVerify(compact, digest, Buffer.from(key, "hex"));
}
