/**
 * API key lifecycle: create (the full key is returned exactly once), list
 * (masked prefixes only), delete (revoke), and authenticate.
 */
import { randomUUID } from "node:crypto";
import { sql } from "kysely";
import { ServiceError } from "../../lib/errors.js";
import type { Db } from "../../storage/db.js";
import { announceChange } from "../../storage/changeFeed.js";
import { generateApiKey, hashApiKey, maskedPrefix } from "./apiKeyFormat.js";

export interface CreatedApiKey {
  id: string;
  accountId: string;
  name: string;
  prefix: string;
  /** The full key. Shown once; only its hash is stored. */
  key: string;
  createdAt: Date;
}

export interface ApiKeyListing {
  id: string;
  accountId: string;
  name: string;
  prefix: string;
  createdAt: Date;
  lastUsedAt: Date | null;
}

/**
 * Creates a key for the account. With `maxLiveKeys`, an account that already
 * holds that many live keys is refused (`key_limit_reached`) and nothing is
 * created: rate limits count per key, so unlimited keys would multiply
 * them. The account's row is locked while counting, so concurrent creations
 * cannot overshoot. The operator's command line passes no limit.
 *
 * @throws ServiceError key_limit_reached
 */
export async function createApiKey(
  db: Db,
  accountId: string,
  name: string,
  opts: { maxLiveKeys?: number } = {},
): Promise<CreatedApiKey> {
  const { maxLiveKeys } = opts;
  if (maxLiveKeys === undefined) return insertApiKey(db, accountId, name);
  return db.transaction().execute(async (tx) => {
    await sql`SELECT 1 FROM accounts WHERE id = ${accountId} FOR UPDATE`.execute(tx);
    const { live } = await tx
      .selectFrom("api_keys")
      .select((eb) => eb.fn.countAll<string | number>().as("live"))
      .where("account_id", "=", accountId)
      .where("revoked_at", "is", null)
      .executeTakeFirstOrThrow();
    if (Number(live) >= maxLiveKeys) {
      throw new ServiceError(
        "key_limit_reached",
        `this account already has ${maxLiveKeys} API keys, the most it may hold: delete one it no longer uses, then create the new one`,
        { details: { limit: maxLiveKeys } },
      );
    }
    return insertApiKey(tx, accountId, name);
  });
}

async function insertApiKey(db: Db, accountId: string, name: string): Promise<CreatedApiKey> {
  const key = generateApiKey();
  const row = await db
    .insertInto("api_keys")
    .values({
      id: randomUUID(),
      account_id: accountId,
      name,
      key_hash: hashApiKey(key),
      prefix: maskedPrefix(key),
      last_used_at: null,
      revoked_at: null,
    })
    .returning(["id", "account_id", "name", "prefix", "created_at"])
    .executeTakeFirstOrThrow();
  return {
    id: row.id,
    accountId: row.account_id,
    name: row.name,
    prefix: row.prefix,
    key,
    createdAt: row.created_at,
  };
}

export async function listApiKeys(db: Db, accountId?: string): Promise<ApiKeyListing[]> {
  let q = db
    .selectFrom("api_keys")
    .select(["id", "account_id", "name", "prefix", "created_at", "last_used_at"])
    .where("revoked_at", "is", null);
  if (accountId) q = q.where("account_id", "=", accountId);
  const rows = await q.orderBy("created_at").execute();
  return rows.map((r) => ({
    id: r.id,
    accountId: r.account_id,
    name: r.name,
    prefix: r.prefix,
    createdAt: r.created_at,
    lastUsedAt: r.last_used_at,
  }));
}

/**
 * Revokes a key by id. The row stays (settlements keep their attribution) but
 * the key never authenticates again. Returns false when no live key matched.
 */
export async function deleteApiKey(
  db: Db,
  id: string,
  /** Only a key of this account (the dashboard); any account when absent (the operator CLI). */
  accountId?: string,
): Promise<boolean> {
  let update = db
    .updateTable("api_keys")
    .set({ revoked_at: new Date() })
    .where("id", "=", id)
    .where("revoked_at", "is", null);
  if (accountId !== undefined) update = update.where("account_id", "=", accountId);
  const res = await update.executeTakeFirst();
  const deleted = res.numUpdatedRows > 0n;
  if (deleted) await announceChange(db, API_KEYS_CHANGED);
  return deleted;
}

/**
 * The channel on which a revocation is announced to every replica sharing
 * the database, so each drops its cached key lookups at once.
 */
export const API_KEYS_CHANGED = "x402_api_keys_changed";
