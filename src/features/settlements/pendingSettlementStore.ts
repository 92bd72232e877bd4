/**
 * `@x402/evm`'s PendingSettlementStore on the database, so a settle retry that
 * lands on another replica reconciles against the transaction already sent
 * instead of broadcasting a second one.
 *
 * The mechanism asks `get` before every settle and `delete` after every
 * final outcome. A settle's own key is read with its intent, in the intent's
 * statement (`InspectedPayment.pendingKey`), so its `get` is answered from
 * the settle's scope without a round trip; any other `get`, and every
 * `delete`, shares one statement with concurrent ones (group commit).
 *
 * Only a settle that ended `settlement_pending` writes a row, so nearly every
 * `delete` is of a key that was never stored. A delete reaches the database
 * only for a key this store has seen stored: written here, or found by `get`
 * (another replica's, or one from before a restart). A settle always asks
 * `get` before it can `delete`, and the intent record lets only one request
 * at a time settle an authorization, so no row can appear for a key between
 * its `get` and its `delete` unseen. That takes a database flush off the path
 * between the receipt and the answer.
 */
import type { PendingSettlementStore } from "@x402/core/facilitator";
import { currentSettlement } from "../../chains/settlementScope.js";
import type { Db } from "../../storage/db.js";
import { DEFAULT_MAX_BATCH, GroupCommit } from "../../storage/groupCommit.js";

// Long enough for any EVM transaction to land or be dropped.
const TTL_MS = 30 * 60 * 1000;

// A key whose settle is never retried is never deleted; past this many the
// oldest are forgotten. A forgotten key's row is only left to expire, and a
// row left over is harmless: a later settle of that signature finds the
// transaction and waits for its receipt, as it would anyway.
const MAX_REMEMBERED = 10_000;

export class DbPendingSettlementStore implements PendingSettlementStore {
  private readonly reads: GroupCommit<string, string | undefined>;
  private readonly deletes: GroupCommit<string, undefined>;
  /** Keys with a row, as far as this store has seen. */
  private readonly stored = new Set<string>();

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
        for (const key of found.keys()) this.remember(key);
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
    // Read with the settle's intent, in its statement.
    const read = currentSettlement()?.pendingSettlement;
    if (read?.key === key) {
      if (read.transaction !== undefined) this.remember(key);
      return Promise.resolve(read.transaction);
    }
    return this.reads.submit(key);
  }

  /**
   * Never throws. The mechanism turns a failed `set` into a final failure
   * answer with the transaction still in flight, which would record a
   * payment that may land as failed. The row is only a shortcut: the
   * settlement's intent row and transaction journal already lead a retry to
   * the transaction sent, so a lost write costs nothing but that shortcut.
   */
  async set(key: string, txHash: string): Promise<void> {
    // Before the write: if its answer is lost, a later delete still runs.
    this.remember(key);
    this.keepRead(key, txHash);
    const expires = new Date(Date.now() + TTL_MS);
    await this.db
      .insertInto("pending_settlements")
      .values({ key, tx_hash: txHash, expires_at: expires })
      .onConflict((oc) => oc.column("key").doUpdateSet({ tx_hash: txHash, expires_at: expires }))
      .execute()
      .catch(() => undefined);
  }

  private remember(key: string): void {
    this.stored.delete(key);
    this.stored.add(key);
    if (this.stored.size > MAX_REMEMBERED) {
      this.stored.delete(this.stored.values().next().value!);
    }
  }

  /** The settle's read of its own key follows what it writes. */
  private keepRead(key: string, transaction: string | undefined): void {
    const read = currentSettlement()?.pendingSettlement;
    if (read?.key === key) read.transaction = transaction;
  }

  async delete(key: string): Promise<void> {
    this.keepRead(key, undefined);
    if (!this.stored.has(key)) return;
    await this.deletes.submit(key);
    this.stored.delete(key);
  }
}
