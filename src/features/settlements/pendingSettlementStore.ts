/**
 * `@x402/evm`'s PendingSettlementStore on the database, so a settle retry that
 * lands on another replica reconciles against the transaction already sent
 * instead of broadcasting a second one.
 *
 * The mechanism asks `get` before every settle and `delete` after every
 * final outcome; concurrent settles share one statement for each (group
 * commit), answered once it has run.
 */
import type { PendingSettlementStore } from "@x402/core/facilitator";
import type { Db } from "../../storage/db.js";
import { DEFAULT_MAX_BATCH, GroupCommit } from "../../storage/groupCommit.js";

// Long enough for any EVM transaction to land or be dropped.
const TTL_MS = 30 * 60 * 1000;

export class DbPendingSettlementStore implements PendingSettlementStore {
  private readonly reads: GroupCommit<string, string | undefined>;
  private readonly deletes: GroupCommit<string, undefined>;

  constructor(private readonly db: Db) {
    this.reads = new GroupCommit(
      async (keys) => {
        const rows = await this.db
          .selectFrom("pending_settlements")
          .select(["key", "tx_hash"])
          .where("key", "in", [...new Set(keys)])
          .where("expires_at", ">", new Date())
          .execute();
        const found = new Map(rows.map((r) => [r.key, r.tx_hash]));
        return keys.map((k) => ({ status: "fulfilled", value: found.get(k) }) as const);
      },
      { maxBatch: DEFAULT_MAX_BATCH },
    );
    this.deletes = new GroupCommit(
      async (keys) => {
        await this.db
          .deleteFrom("pending_settlements")
          .where("key", "in", [...new Set(keys)])
          .execute();
        return keys.map(() => ({ status: "fulfilled", value: undefined }) as const);
      },
      { maxBatch: DEFAULT_MAX_BATCH },
    );
  }

  get(key: string): Promise<string | undefined> {
    return this.reads.submit(key);
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
    await this.deletes.submit(key);
  }
}
