/**
 * Waits for many transactions at once by following blocks, instead of
 * polling each hash: one `eth_blockNumber` per tick and one
 * `eth_getBlockReceipts` per new block, whatever the number of transactions
 * in flight. The tick is a fraction of the block time.
 */
import type { Hex, PublicClient, TransactionReceipt } from "viem";

interface Waiter {
  resolve(r: TransactionReceipt): void;
}

export class ReceiptWatcher {
  private readonly waiting = new Map<string, Waiter[]>();
  private lastBlock: bigint | undefined;
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;
  private stopped = false;

  constructor(
    private readonly client: PublicClient,
    private readonly tickMs: number,
    private readonly onError: (e: unknown) => void = () => undefined,
  ) {}

  /** Resolves with the receipt once `hash` is mined; never rejects (callers bound it with a timeout). */
  wait(hash: Hex): Promise<TransactionReceipt> {
    return new Promise((resolve) => {
      const key = hash.toLowerCase();
      const list = this.waiting.get(key) ?? [];
      list.push({ resolve });
      this.waiting.set(key, list);
      this.ensureRunning();
    });
  }

  /** Stops waiting for a hash (e.g. after it was replaced). */
  forget(hash: Hex): void {
    this.waiting.delete(hash.toLowerCase());
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private ensureRunning(): void {
    if (this.timer || this.stopped) return;
    this.timer = setTimeout(() => void this.tick(), 0);
  }

  private async tick(): Promise<void> {
    this.timer = undefined;
    if (this.ticking || this.stopped) return;
    this.ticking = true;
    try {
      const head = await this.client.getBlockNumber({ cacheTime: 0 });
      // Start one block back the first time: a transaction sent just before
      // we began watching may already be in the head block.
      let next = this.lastBlock === undefined ? (head > 0n ? head - 1n : 0n) : this.lastBlock + 1n;
      for (; next <= head && this.waiting.size > 0; next++) {
        const receipts = await this.client.getBlockReceipts({ blockNumber: next });
        for (const r of receipts) {
          const key = r.transactionHash.toLowerCase();
          const waiters = this.waiting.get(key);
          if (!waiters) continue;
          this.waiting.delete(key);
          for (const w of waiters) w.resolve(r);
        }
        this.lastBlock = next;
      }
      // Idle: forget the position, so the next wait starts near the head
      // instead of scanning every block mined in between.
      if (this.waiting.size === 0) this.lastBlock = undefined;
    } catch (e) {
      this.onError(e);
    } finally {
      this.ticking = false;
      if (this.waiting.size > 0 && !this.stopped)
        this.timer = setTimeout(() => void this.tick(), this.tickMs);
    }
  }
}
