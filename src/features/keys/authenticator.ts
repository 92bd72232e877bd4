/**
 * Resolves an `X-API-Key` header to its account, on the hot path of every
 * /verify and /settle.
 *
 * The lookup is by SHA-256 hash (a unique index), and the stored hash is then
 * compared in constant time. Results, hits and misses alike, are cached for a
 * few seconds so a flood of requests costs one query per key, and so revoking
 * a key takes effect within that window on every replica. `last_used_at` is
 * written at most once a minute per key, off the request path.
 *
 * The same lookup reads the account's plan and balance, so the rate limit
 * knows a key's budget without a query of its own.
 */
import type { Db } from "../../storage/db.js";
import { holdsFreeLimits, planNamed, type PlanName } from "../plans/plans.js";
import { hashApiKey, looksLikeApiKey, sameHash } from "./apiKeyFormat.js";

export interface ApiKeyPrincipal {
  keyId: string;
  keyName: string;
  accountId: string;
}

/** A valid key: who it is, and its account's plan as of the (cached) lookup. */
export interface IdentifiedKey {
  principal: ApiKeyPrincipal;
  /** The plan whose request limit applies: Free for pay-as-you-go without a prepaid balance. */
  plan: PlanName;
}

interface CacheEntry {
  found: IdentifiedKey | null;
  expiresAt: number;
}

export interface AuthenticatorOptions {
  cacheTtlMs?: number;
  maxEntries?: number;
  onError?: (e: unknown) => void;
}

const LAST_USED_INTERVAL_MS = 60_000;

export class ApiKeyAuthenticator {
  private readonly cache = new Map<string, CacheEntry>();
  private readonly lastUsedWritten = new Map<string, number>();
  private readonly ttl: number;
  private readonly maxEntries: number;

  constructor(
    private readonly db: Db,
    private readonly opts: AuthenticatorOptions = {},
  ) {
    this.ttl = opts.cacheTtlMs ?? 5_000;
    this.maxEntries = opts.maxEntries ?? 10_000;
  }

  async authenticate(rawKey: string | undefined): Promise<ApiKeyPrincipal | null> {
    return (await this.identify(rawKey))?.principal ?? null;
  }

  /** The key's principal and its account's plan; null for a missing, wrong or revoked key. */
  async identify(rawKey: string | undefined): Promise<IdentifiedKey | null> {
    if (!rawKey || !looksLikeApiKey(rawKey)) return null;
    const hash = hashApiKey(rawKey);
    const cacheKey = hash.toString("base64");
    const now = Date.now();
    const cached = this.cache.get(cacheKey);
    let found: IdentifiedKey | null;
    if (cached && cached.expiresAt > now) {
      found = cached.found;
    } else {
      found = await this.lookup(hash);
      if (this.cache.size >= this.maxEntries) this.cache.clear();
      this.cache.set(cacheKey, { found, expiresAt: now + this.ttl });
    }
    if (found) this.touch(found.principal.keyId, now);
    return found;
  }

  /** Forgets cached results, e.g. right after a key is deleted or a plan changed. */
  invalidate(): void {
    this.cache.clear();
  }

  private async lookup(hash: Buffer): Promise<IdentifiedKey | null> {
    const row = await this.db
      .selectFrom("api_keys")
      .innerJoin("accounts", "accounts.id", "api_keys.account_id")
      .select([
        "api_keys.id",
        "api_keys.name",
        "api_keys.account_id",
        "api_keys.key_hash",
        "accounts.plan",
        "accounts.balance_micro_usd",
      ])
      .where("api_keys.key_hash", "=", hash)
      .where("api_keys.revoked_at", "is", null)
      .executeTakeFirst();
    if (!row || !sameHash(row.key_hash, hash)) return null;
    return {
      principal: { keyId: row.id, keyName: row.name, accountId: row.account_id },
      plan: holdsFreeLimits(row.plan, row.balance_micro_usd) ? "free" : planNamed(row.plan),
    };
  }

  private touch(keyId: string, now: number): void {
    const last = this.lastUsedWritten.get(keyId) ?? 0;
    if (now - last < LAST_USED_INTERVAL_MS) return;
    this.lastUsedWritten.set(keyId, now);
    this.db
      .updateTable("api_keys")
      .set({ last_used_at: new Date(now) })
      .where("id", "=", keyId)
      .execute()
      .catch((e: unknown) => this.opts.onError?.(e));
  }
}
