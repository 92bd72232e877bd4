/**
 * API key format and hashing.
 *
 * A key is `x402_sk_` followed by 32 random bytes in base64url (256 bits of
 * entropy). Because keys are random rather than chosen by people, a single
 * SHA-256 is a sound way to store them: there is nothing to brute-force.
 * The masked prefix shown in listings is the first 12 characters.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

const KEY_PREFIX = "x402_sk_";
const KEY_PATTERN = /^x402_sk_[A-Za-z0-9_-]{43}$/;
const VISIBLE_CHARS = 12;

export function generateApiKey(): string {
  return KEY_PREFIX + randomBytes(32).toString("base64url");
}

export function hashApiKey(key: string): Buffer {
  return createHash("sha256").update(key, "utf8").digest();
}

export function maskedPrefix(key: string): string {
  return `${key.slice(0, VISIBLE_CHARS)}…`;
}

/** Cheap shape check so garbage never reaches the database. */
export function looksLikeApiKey(key: string): boolean {
  return KEY_PATTERN.test(key);
}

/** Constant-time comparison of two key hashes. */
export function sameHash(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}
