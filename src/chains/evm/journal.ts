/**
 * The port through which the EVM transaction layer makes its work durable.
 * Implemented by features/settlements on the database; the chain layer only
 * knows this interface.
 *
 * Order of calls for one transaction: `signed` (before it is sent, with the
 * raw bytes, so a crash right after can be recovered by rebroadcasting the
 * very same transaction) → broadcast → `mined`.
 */
export interface SignedTransaction {
  settlementId: string | undefined;
  network: string;
  signer: `0x${string}`;
  nonce: number;
  hash: `0x${string}`;
  raw: `0x${string}`;
  /** Set when this transaction replaces an earlier one (fee bump). */
  replaces?: `0x${string}`;
}

export interface TransactionJournal {
  signed(tx: SignedTransaction): Promise<void>;
  mined(hash: `0x${string}`, status: "success" | "reverted", blockNumber: bigint): Promise<void>;
}

export const noopJournal: TransactionJournal = {
  async signed() {},
  async mined() {},
};
