/**
 * The receipts of the latest Starknet blocks, read whole once for every
 * settle waiting on them.
 *
 * When a block is made, every settle waiting for one wakes at once. Each
 * used to ask the node for its own receipt, and for its status when the
 * receipt was not there yet: two calls per waiting settle per block, each
 * answered, parsed and handled by starknet.js on the service's thread.
 * When enough settles wait, the new block is read instead, with every
 * receipt in it (`starknet_getBlockWithReceipts`), and each settle looks its
 * transaction up in what was read.
 *
 * A lookup is exact or it declines: "not in any block since it was sent"
 * is said only when every one of those blocks was read whole. A block not
 * read (few waited, the read failed, too many blocks passed at once) makes
 * the lookup answer "not known", and the settle asks the node for its
 * receipt as before. So does a block that a new block no longer builds on
 * (a reorg): blocks kept are dropped once a newer one names another parent.
 */

/** A transaction's receipt as the settle reads it (what `outcome` decides on). */
export interface StarknetReceipt {
  finality_status?: string;
  execution_status?: string;
  block_number?: number;
  revert_reason?: string;
  events?: { from_address: string; keys: string[]; data: string[] }[];
  actual_fee?: { amount?: unknown; unit?: unknown };
}

/**
 * From this many waiting settles, a new block is read whole: below it,
 * their own receipt calls cost less than a mainnet block's every receipt.
 */
export const READ_WHOLE_FROM = 8;
/** The most blocks read at one new head; older ones are left to receipt calls. */
const MOST_AT_ONCE = 4;
/** Blocks kept for a settle that looks a little late. */
const KEEP_BLOCKS = 16;

/** A hash as one number, whatever its padding or case. */
const keyOf = (hash: string): string => BigInt(hash).toString(16);

/** Whether two hashes are one; one that is not a number matches nothing. */
function sameHash(a: string, b: string): boolean {
  try {
    return keyOf(a) === keyOf(b);
  } catch {
    return false;
  }
}

/** A block read whole: its hash, its parent's, and its receipts by transaction. */
interface ReadBlock {
  hash: string;
  parent: string;
  receipts: Map<string, StarknetReceipt>;
}

export class BlockReceipts {
  /** Each block read whole, by block number. */
  private readonly blocks = new Map<number, ReadBlock>();

  constructor(private readonly readBlock: (block: number) => Promise<unknown>) {}

  /**
   * A new head, `latest`, after `previous`: reads the blocks in between
   * whole if `waiting` settles wait for them. Never throws: a block not
   * read is only a block whose settles ask for their receipts.
   */
  async follow(previous: number | undefined, latest: number, waiting: number): Promise<void> {
    if (waiting < READ_WHOLE_FROM) return;
    const from = Math.max(
      previous === undefined ? latest : previous + 1,
      latest - MOST_AT_ONCE + 1,
    );
    const numbers: number[] = [];
    for (let n = from; n <= latest; n++) if (!this.blocks.has(n)) numbers.push(n);
    await Promise.all(
      numbers.map(async (n) => {
        const read = await this.readBlock(n)
          .then(receiptsOf)
          .catch(() => undefined);
        if (read) this.blocks.set(n, read);
      }),
    );
    for (const n of this.blocks.keys()) if (n <= latest - KEEP_BLOCKS) this.blocks.delete(n);
    this.dropOffChain();
  }

  /**
   * A block kept whose child, as read now, names another parent was taken
   * back by a reorg: it and every block before it are dropped, and settles
   * that looked there ask the node instead.
   */
  private dropOffChain(): void {
    const numbers = [...this.blocks.keys()].sort((a, b) => b - a);
    for (const n of numbers) {
      const child = this.blocks.get(n);
      const parent = this.blocks.get(n - 1);
      if (!child || !parent || sameHash(child.parent, parent.hash)) continue;
      for (const m of this.blocks.keys()) if (m < n) this.blocks.delete(m);
      return;
    }
  }

  /**
   * The receipt of `hash` in the blocks after `after` up to `upTo`: `null`
   * when every one of them was read and none holds it, `undefined` when
   * one was not read (ask the node).
   */
  find(
    hash: string,
    after: number | undefined,
    upTo: number | undefined,
  ): StarknetReceipt | null | undefined {
    if (after === undefined || upTo === undefined) return undefined;
    const key = keyOf(hash);
    for (let n = after + 1; n <= upTo; n++) {
      const block = this.blocks.get(n);
      if (!block) return undefined;
      const found = block.receipts.get(key);
      if (found) return found;
    }
    return null;
  }
}

/**
 * A block with receipts (`BLOCK_WITH_RECEIPTS`: each entry a `transaction`
 * and its `receipt`, the block's number, hash and parent on the block);
 * undefined for a block not yet accepted or a shape this does not know, so
 * no settle trusts it.
 */
function receiptsOf(block: unknown): ReadBlock | undefined {
  if (typeof block !== "object" || block === null) return undefined;
  const b = block as {
    block_number?: unknown;
    block_hash?: unknown;
    parent_hash?: unknown;
    status?: unknown;
    transactions?: unknown;
  };
  if (typeof b.block_number !== "number" || !Array.isArray(b.transactions)) return undefined;
  if (typeof b.block_hash !== "string" || typeof b.parent_hash !== "string") return undefined;
  if (b.status !== "ACCEPTED_ON_L2" && b.status !== "ACCEPTED_ON_L1") return undefined;
  const byHash = new Map<string, StarknetReceipt>();
  for (const entry of b.transactions as unknown[]) {
    const e = entry as {
      transaction?: { transaction_hash?: unknown };
      receipt?: StarknetReceipt & { transaction_hash?: unknown };
    } | null;
    const hash = e?.receipt?.transaction_hash ?? e?.transaction?.transaction_hash;
    if (typeof hash !== "string" || typeof e?.receipt !== "object") return undefined;
    byHash.set(keyOf(hash), {
      ...e.receipt,
      finality_status: e.receipt.finality_status ?? b.status,
      block_number: b.block_number,
    });
  }
  return { hash: b.block_hash, parent: b.parent_hash, receipts: byHash };
}
