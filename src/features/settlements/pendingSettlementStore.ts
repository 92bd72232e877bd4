/**
 * `@x402/evm`'s PendingSettlementStore on the database, so a settle retry that
 * lands on another replica reconciles against the transaction already sent
 * instead of broadcasting a second one.
 */
import type { PendingSettlementStore } from "@x402/core/facilitator";
import type { Db } from "../../storage/db.js";

// Long enough for any EVM transaction to land or be dropped.
const TTL_MS = 30 * 60 * 1000;

export class DbPendingSettlementStore implements PendingSettlementStore {
  constructor(private readonly db: Db) {}

  async get(key: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom("pending_settlements")
      .select("tx_hash")
      .where("key", "=", key)
      .where("expires_at", ">", new Date())
      .executeTakeFirst();
    return row?.tx_hash;
  }

  async set(key: string, txHash: string): Promise<void> {
    const expires = new Date(Date.now() + TTL_MS);
    await this.db
      .insertInto("pending_settlements")
      .values({ key, tx_hash: txHash, expires_at: expires })
      .onConflict((oc) => oc.column("key").doUpdateSet({ tx_hash: txHash, expires_at: expires }))
      .execute();
  }

  async delete(key: string): Promise<void> {
    await this.db.deleteFrom("pending_settlements").where("key", "=", key).execute();
  }
}
