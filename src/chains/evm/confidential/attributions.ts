/**
 * The attribution each confidential payment carries into the vault's
 * `collect`: its commitment to the merchant's slot and the operator's
 * signature of it, made by the vault client (`attribute`) just before the
 * payment's mechanism runs and read by the collecting signer
 * (collectingSigner.ts) when that mechanism sends the authorization. The
 * mechanism owns the call stack between the two, so this is how they meet:
 * by vault and payment key, in this process, for a few minutes.
 *
 * Both halves are deterministic (the blinding comes from the slot's salt and
 * the payment's key; the signature is RFC 6979), so a settle retried on
 * another replica attributes the payment identically.
 */
import type { Hex } from "viem";

/** `collect`'s last argument: the commitment, then the operator's 65-byte signature. */
export interface Attribution {
  commitment: Hex;
  signature: Hex;
}

/** Long enough for any settle (the mechanism sends within seconds). */
const KEEP_MS = 15 * 60_000;
/** Beyond this many, the expired entries are dropped at the next write. */
const PRUNE_ABOVE = 10_000;

const kept = new Map<string, { attribution: Attribution; until: number }>();

const id = (vault: string, key: string) => `${vault.toLowerCase()}:${key.toLowerCase()}`;

export function keepAttribution(vault: string, key: Hex, attribution: Attribution): void {
  const now = Date.now();
  if (kept.size > PRUNE_ABOVE) {
    for (const [k, v] of kept) if (v.until < now) kept.delete(k);
  }
  kept.set(id(vault, key), { attribution, until: now + KEEP_MS });
}

export function attributionOf(vault: string, key: Hex): Attribution | undefined {
  const found = kept.get(id(vault, key));
  return found && found.until >= Date.now() ? found.attribution : undefined;
}
