/**
 * The optional bearer token in front of GET /metrics (METRICS_TOKEN): the
 * metrics show per-network volumes, the mix of refusal reasons and signer
 * balances, which are the operator's business. Compared in constant time,
 * over digests so the lengths never differ.
 */
import { createHash, timingSafeEqual } from "node:crypto";

const digest = (value: string) => createHash("sha256").update(value, "utf8").digest();

/** Whether an `Authorization` header carries exactly `Bearer <token>`. */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const presented = /^Bearer ([\x21-\x7e]+)$/.exec(header ?? "")?.[1] ?? "";
  // Compared even when absent, so a missing header costs what a wrong one does.
  const same = timingSafeEqual(digest(presented), digest(token));
  return same && presented.length > 0;
}
