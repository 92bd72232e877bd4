/**
 * Group commit: callers that want the same kind of write at the same time
 * share one flush (one statement or one transaction), so the database's
 * round trips grow with flushes, not with callers.
 *
 * - A flush starts as soon as the previous one has finished, and items
 *   arriving during a flush wait for it and go together in the next. An
 *   item that finds the batcher idle is flushed in the same turn of the
 *   event loop (`setImmediate`: right after the I/O callbacks being run), so
 *   requests that arrived together share a flush and a lone one waits for
 *   no timer.
 * - At most `maxBatch` items per flush, in arrival order; the rest wait for
 *   the next flush.
 * - A caller's promise settles only when its flush has finished: a write is
 *   answered after it is committed, never before.
 * - The flush answers each item on its own (`PromiseSettledResult`), so an
 *   item refused on its merits (a quota exceeded) refuses only itself.
 * - A flush must be atomic: when it throws it wrote nothing. The batch is
 *   then split in halves and each half flushed again, down to single items,
 *   so a row that fails its statement fails only its own caller.
 */

/**
 * A flush size that keeps every statement small: the widest row written this
 * way has about 20 columns, so a flush stays far below PostgreSQL's 65,535
 * parameters, and one flush holds PGlite's single connection only briefly.
 */
export const DEFAULT_MAX_BATCH = 200;

export type Flush<I, O> = (items: readonly I[]) => Promise<readonly PromiseSettledResult<O>[]>;

export interface GroupCommitOptions {
  /** The most items one flush takes. */
  maxBatch: number;
}

interface Waiting<I, O> {
  item: I;
  resolve: (value: O) => void;
  reject: (reason: unknown) => void;
}

export class GroupCommit<I, O> {
  private readonly queue: Waiting<I, O>[] = [];
  private flushing = false;

  constructor(
    private readonly flush: Flush<I, O>,
    private readonly opts: GroupCommitOptions,
  ) {
    if (!(opts.maxBatch >= 1)) throw new Error("maxBatch must be at least 1");
  }

  /** Resolves with the item's own result once the flush that carried it has finished. */
  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (this.flushing) return;
      this.flushing = true;
      setImmediate(() => void this.drain());
    });
  }

  /** Items waiting for a flush (not counting the one running). */
  get waiting(): number {
    return this.queue.length;
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        await this.run(this.queue.splice(0, this.opts.maxBatch));
      }
    } finally {
      this.flushing = false;
    }
  }

  private async run(batch: Waiting<I, O>[]): Promise<void> {
    let results: readonly PromiseSettledResult<O>[];
    try {
      results = await this.flush(batch.map((w) => w.item));
    } catch (e) {
      if (batch.length === 1) {
        batch[0]!.reject(e);
        return;
      }
      const half = Math.ceil(batch.length / 2);
      await this.run(batch.slice(0, half));
      await this.run(batch.slice(half));
      return;
    }
    if (results.length !== batch.length) {
      // A flush that wrote but answered the wrong number of items is a bug:
      // nobody is told success, and nothing is written twice.
      const bug = new Error(`a flush of ${batch.length} items answered ${results.length}`);
      for (const w of batch) w.reject(bug);
      return;
    }
    results.forEach((r, i) => {
      if (r.status === "fulfilled") batch[i]!.resolve(r.value);
      else batch[i]!.reject(r.reason);
    });
  }
}
