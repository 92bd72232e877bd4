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
 * Kept per process, over the transactions this process sends: with several
 * replicas the service's bound is the budget times the replicas.
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

export class FailedGasBudget {
  /** Reverted transactions in the window: when, and what each cost. */
  private readonly failures: { at: number; wei: bigint }[] = [];
  private readonly inFlight = new Map<symbol, bigint>();
  private inFlightWei = 0n;

  constructor(
    private readonly network: string,
    /** Undefined: no budget. */
    readonly budgetWei: bigint | undefined,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Holds `worstWei` (a transaction's gas limit times its maximum fee) until
   * `finish`; throws FailedGasBudgetSpentError when it does not fit.
   */
  reserve(worstWei: bigint): symbol {
    const token = Symbol("in-flight");
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

  /** What reverted transactions cost in the last hour. */
  spent(): bigint {
    const since = this.now() - WINDOW_MS;
    while (this.failures.length > 0 && this.failures[0]!.at <= since) this.failures.shift();
    return this.failures.reduce((sum, f) => sum + f.wei, 0n);
  }

  /** Until the oldest failure leaves the window, or a few seconds while only in-flight ones hold it. */
  private retryAfter(): number {
    const oldest = this.failures[0];
    if (!oldest) return 10;
    return Math.max(1, Math.ceil((oldest.at + WINDOW_MS - this.now()) / 1000));
  }
}
