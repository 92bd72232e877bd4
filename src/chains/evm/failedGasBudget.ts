/**
 * The service's hourly budget, per network, of native currency it may spend
 * on transactions that fail on-chain.
 *
 * Each party is bounded on its own (a payer by its cooling period, an
 * account by its failure limit, a transaction by its shape's gas ceiling),
 * but many fresh payers, or many accounts, still add up. This bounds the
 * sum: what reverted transactions cost in the last hour, plus what every
 * transaction still in flight could cost if it reverted (its gas limit times
 * its maximum fee), may not pass the budget; a transaction that would take
 * it past is not sent (FailedGasBudgetSpentError, answered 503 with
 * `Retry-After`). In-flight transactions count because a burst sent
 * together fails together, before any failure is known.
 *
 * The reverted transactions' cost is the service's: read from the journal,
 * which every replica writes (refreshed every few seconds, and at start, so
 * a restart does not forget the hour), or this process's own count where
 * that is higher (its latest failures, before a refresh has seen them).
 * Transactions in flight are this process's: another replica's burst, sent
 * at the same moment, is known once it has failed.
 */
export class FailedGasBudgetSpentError extends Error {
  constructor(
    readonly network: string,
    readonly budgetWei: bigint,
    readonly retryAfterSeconds: number,
  ) {
    super(
      `the service's hourly budget for settlements that fail on-chain on ${network} is spent; settles there resume in ${retryAfterSeconds} s`,
    );
    this.name = "FailedGasBudgetSpentError";
  }
}

const WINDOW_MS = 60 * 60 * 1000;
/** How stale the service-wide figure may be before a reservation refreshes it. */
const REFRESH_MS = 5_000;

export class FailedGasBudget {
  /** Reverted transactions in the window: when, and what each cost. */
  private readonly failures: { at: number; wei: bigint }[] = [];
  private readonly inFlight = new Map<symbol, bigint>();
  private inFlightWei = 0n;
  /** The journal's figure for the window, and when it was read. */
  private recorded = { wei: 0n, at: Number.NEGATIVE_INFINITY };
  private refreshing: Promise<void> | undefined;

  constructor(
    private readonly network: string,
    /** Undefined: no budget. */
    readonly budgetWei: bigint | undefined,
    private readonly now: () => number = Date.now,
    /** The service-wide cost of reverted transactions since a time (the journal's). */
    private readonly revertedSince?: (since: Date) => Promise<bigint>,
  ) {}

  /**
   * Reads the service-wide figure now (at start, and before a reservation
   * when it is stale). A failed read keeps the last figure: this process's
   * own count still bounds what it sends.
   */
  refresh(): Promise<void> {
    if (!this.revertedSince || this.budgetWei === undefined) return Promise.resolve();
    this.refreshing ??= this.revertedSince(new Date(this.now() - WINDOW_MS))
      .then((wei) => {
        this.recorded = { wei, at: this.now() };
      })
      .catch(() => undefined)
      .finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  /**
   * Holds `worstWei` (a transaction's gas limit times its maximum fee) until
   * `finish`; throws FailedGasBudgetSpentError when it does not fit.
   */
  reserve(worstWei: bigint): symbol {
    const token = Symbol("in-flight");
    if (this.now() - this.recorded.at > REFRESH_MS) void this.refresh();
    if (this.budgetWei !== undefined) {
      const spent = this.spent();
      if (spent + this.inFlightWei + worstWei > this.budgetWei) {
        throw new FailedGasBudgetSpentError(this.network, this.budgetWei, this.retryAfter());
      }
    }
    this.inFlight.set(token, worstWei);
    this.inFlightWei += worstWei;
    return token;
  }

  /** The transaction ended: mined (`reverted` counts its fee), or never sent (no fee). */
  finish(token: symbol, reverted: boolean, feeWei: bigint): void {
    const held = this.inFlight.get(token);
    if (held === undefined) return;
    this.inFlight.delete(token);
    this.inFlightWei -= held;
    if (reverted && feeWei > 0n) this.failures.push({ at: this.now(), wei: feeWei });
  }

  /** What reverted transactions cost in the last hour: the service's, or this process's if higher. */
  spent(): bigint {
    const since = this.now() - WINDOW_MS;
    while (this.failures.length > 0 && this.failures[0]!.at <= since) this.failures.shift();
    const own = this.failures.reduce((sum, f) => sum + f.wei, 0n);
    return own > this.recorded.wei ? own : this.recorded.wei;
  }

  /** Until the oldest failure leaves the window, or a few seconds while only in-flight ones hold it. */
  private retryAfter(): number {
    const oldest = this.failures[0];
    if (!oldest) return 10;
    return Math.max(1, Math.ceil((oldest.at + WINDOW_MS - this.now()) / 1000));
  }
}
