/**
 * Caps how many catalog reads query the database at once. Discovery is
 * public and unauthenticated; on the embedded database every query runs on
 * the one thread in arrival order, so without a cap a burst of searches
 * would queue ahead of /verify and /settle. Waiting reads queue here instead,
 * and payment queries slip in between them.
 */
export class Gate {
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly max: number) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError("max must be a positive integer");
  }

  get queued(): number {
    return this.waiting.length;
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.active >= this.max) {
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.active++;
    }
    try {
      return await task();
    } finally {
      const next = this.waiting.shift();
      // The slot passes straight to the next waiter; `active` is unchanged.
      if (next) next();
      else this.active--;
    }
  }
}
