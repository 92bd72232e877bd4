/**
 * The database side of the EVM transaction journal: each signed transaction
 * is written before it is broadcast, and the settlement row learns its hash
 * at that moment.
 */
import type { TransactionJournal, SignedTransaction } from "../../chains/evm/journal.js";
import type { Db } from "../../storage/db.js";

export class DbTransactionJournal implements TransactionJournal {
  constructor(private readonly db: Db) {}

  async signed(tx: SignedTransaction): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await trx
        .insertInto("settlement_transactions")
        .values({
          hash: tx.hash,
          settlement_id: tx.settlementId ?? null,
          network: tx.network,
          signer: tx.signer.toLowerCase(),
          nonce: tx.nonce,
          raw: tx.raw,
          replaces: tx.replaces ?? null,
        })
        .onConflict((oc) => oc.column("hash").doNothing())
        .execute();
      if (tx.settlementId && !tx.replaces) {
        await trx
          .updateTable("settlements")
          .set({ transaction: tx.hash })
          .where("id", "=", tx.settlementId)
          .where("transaction", "is", null)
          .execute();
      }
    });
  }

  async mined(
    hash: `0x${string}`,
    status: "success" | "reverted",
    blockNumber: bigint,
  ): Promise<void> {
    await this.db
      .updateTable("settlement_transactions")
      .set({ status, block_number: blockNumber.toString() })
      .where("hash", "=", hash)
      .execute();
  }
}
