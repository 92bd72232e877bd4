/**
 * The latest Starknet block, watched once for every settle that waits on
 * it. A settlement is decided only by a block, so asking each transaction's
 * receipt every polling interval spent two calls per waiting settle per
 * interval (the receipt, then its status), most of them answered "not yet",
 * on the service's CPU and the node's. Now one `starknet_blockNumber` per
 * interval serves every waiting settle, and each asks for its receipt when a
 * block after its last look exists. Idle (no one waiting), it asks nothing.
 * A new head is handed to `onNewHead` (blockReceipts.ts reads it whole when
 * enough settles wait) before the waiting settles wake to look it up.
 */
export class BlockTicker {
  private latest: number | undefined;
  private readonly waiters = new Set<() => void>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly readBlockNumber: () => Promise<number>,
    private readonly intervalMs: number,
    private readonly onNewHead?: (
      previous: number | undefined,
      latest: number,
      waiting: number,
    ) => Promise<void>,
  ) {}

  /** The latest block number seen by this ticker (undefined before its first look). */
  known(): number | undefined {
    return this.latest;
  }

  /**
   * Resolves once a block after `seen` is known, or after `maxMs`, whichever
   * comes first (a failed look counts as nothing new: the caller looks
   * again at its receipt then).
   */
  waitPast(seen: number | undefined, maxMs: number): Promise<void> {
    if (seen !== undefined && this.latest !== undefined && this.latest > seen) {
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      // Past `maxMs` (the settle's budget, or a look missed) the caller looks for itself.
      const timer = setTimeout(done, Math.max(0, Math.min(maxMs, this.intervalMs * 4)));
      this.waiters.add(done);
      this.schedule();
    });
  }

  close(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    for (const wake of [...this.waiters]) wake();
  }

  private schedule(): void {
    if (this.timer !== undefined) return;
    this.timer = setTimeout(() => void this.look(), this.intervalMs);
    this.timer.unref();
  }

  private async look(): Promise<void> {
    try {
      const block = await this.readBlockNumber();
      if (this.latest === undefined || block > this.latest) {
        await this.onNewHead?.(this.latest, block, this.waiters.size);
        this.latest = block;
        for (const wake of [...this.waiters]) wake();
      }
    } catch {
      // The node did not answer: waiters keep waiting, up to their own limit.
    } finally {
      this.timer = undefined;
      if (this.waiters.size > 0) this.schedule();
    }
  }
}
