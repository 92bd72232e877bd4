/**
 * The service's hourly budget, per network, of native currency its own
 * accounts may spend on transactions that fail on-chain: every family that
 * pays fees (EVM gas, Solana lamports, NEAR yoctoNEAR, Starknet fri) keeps
 * one per network, in the chain's smallest native unit.
 *
 * Each party is bounded on its own (a payer by its cooling period, an
 * account by its failure limit, a transaction by its fee ceiling), but many
 * fresh payers, or many accounts, still add up. This bounds the sum: what
 * reverted transactions cost in the last hour, plus what every transaction
 * still in flight could cost if it reverted (its worst fee: EVM gas limit
 * times maximum fee, a Solana transaction's signatures and compute-unit
 * price), may not pass the budget; a transaction that would take it past is
 * not sent (FailedFeeBudgetSpentError: the settle is answered 503 with
 * `Retry-After`, nothing recorded against anyone). In-flight transactions
 * count because a burst sent together fails together, before any failure is
 * known.
 *
 * Both figures are the service's, read from the journal every replica
 * writes (refreshed every few seconds, and at start, so a restart does not
 * forget the hour): the fees of the window's reverted transactions, and the
 * worst fees of its transactions journaled `sent` and not finished. Between
 * two reads this process adds what it knows better:
 * - its own failures, where their sum is higher than the journal's figure
 *   (its latest, before a read has seen them);
 * - its own transactions in flight that the last read could not have seen
 *   (reserved, or journaled after that read began).
 * So the budget is passed by at most what other replicas reserve between
 * two reads (a few seconds of their sends, each at its worst fee), and never
 * by this process's own sends. A transaction left `sent` by a replica that
 * died counts until it is finished or its hour has passed. Every mined
 * transaction of a settlement recorded failed counts as failed, reverted or
 * not (a batch `settle` that moved nothing still cost its gas).
 *
 * No one account may spend the pool for everyone. Each account answers for
 * the failures of what it submits (its payers' included: it chose to settle
 * them), in value: once it has failures in the window, its failed fees plus
 * its sends in flight may not pass `accountShare` of the budget (a quarter
 * by default), so one account spends a network's pool only with a single
 * burst of payers it has never failed with, which the payer lanes bound to
 * one transaction per payer. As the pool runs low the riskiest traffic is
 * refused first (PAYER_TIERS): from three eighths spent by failures,
 * payers with code and no settled payment on record; from half, any payer with
 * no settled payment (where a burst of fresh wallets comes from); from
 * five eighths, any payer with code; past three quarters, any account
 * with a failure of its own in the window, so the last quarter is kept
 * for accounts whose settles have not failed and their proven payers. A refusal's `Retry-After` is the service's: when
 * the window's oldest failure (any replica's) leaves it.
 */
import { FailedFeeBudgetSpentError, type FailedFeeExposure } from "./ports.js";
import { currentSettlement } from "./settlementScope.js";
import { Reason } from "../protocol/reasons.js";
import { ConfigError } from "../lib/configError.js";

export { FailedFeeBudgetSpentError, type FailedFeeExposure };

/** The share of a network's budget one account's failures and sends in flight may use. */
const DEFAULT_ACCOUNT_SHARE = 0.25;
/**
 * As failures spend the pool, payers are refused riskiest first, each from
 * the share of the budget failures have spent: a burst of fresh wallets is
 * where cheap failures come from, and code at a payer's address runs inside
 * our transaction, so it can fail on-chain after passing every simulation.
 * A payer with a settled payment and no code is never refused by a tier.
 */
const PAYER_TIERS: readonly {
  from: number;
  scope: "new-payer" | "payer-with-code";
  applies: (known: boolean | undefined, hasCode: boolean | undefined) => boolean;
}[] = [
  // Code, and no settled payment on record: the riskiest. Above one
  // account's share, so no account closes a tier for everyone alone.
  { from: 0.375, scope: "payer-with-code", applies: (known, code) => known === false && !!code },
  { from: 0.5, scope: "new-payer", applies: (known) => known === false },
  { from: 0.625, scope: "payer-with-code", applies: (_, code) => !!code },
];
/** Past this share of the budget spent, accounts with failures of their own are refused first. */
const RESERVED_FROM = 0.75;

const WINDOW_MS = 60 * 60 * 1000;
/** How stale the service-wide figure may be before a reservation refreshes it. */
const REFRESH_MS = 5_000;

interface Hold {
  worst: bigint;
  /** When its journal entry was written (undefined: not yet). */
  journaledAt: number | undefined;
  /** The account that submitted the settlement (undefined: the service's own send). */
  account: string | undefined;
}

type AccountFigures = ReadonlyMap<string, { failed: bigint; inFlight: bigint }>;

export class FailedFeeBudget {
  /** Reverted transactions in the window: when, and what each cost. */
  private readonly failures: { at: number; fee: bigint; account: string | undefined }[] = [];
  private readonly holds = new Map<symbol, Hold>();
  /**
   * This process's transactions that ended after their journal entry was
   * written: a read that began between the two counted them in flight, and
   * they count as failed (or not at all) now, so that read's in-flight
   * figure is lowered by them until the next read (which sees them ended).
   */
  private endedSinceJournaled: {
    worst: bigint;
    account: string | undefined;
    journaledAt: number;
    endedAt: number;
  }[] = [];
  /** The journal's figures for the window, and when the read that gave them began. */
  private recorded: {
    reverted: bigint;
    inFlight: bigint;
    accounts: AccountFigures;
    oldestFailure: number | undefined;
    readAt: number;
  } = {
    reverted: 0n,
    inFlight: 0n,
    accounts: new Map(),
    oldestFailure: undefined,
    readAt: Number.NEGATIVE_INFINITY,
  };
  private refreshing: Promise<void> | undefined;

  constructor(
    private readonly network: string,
    /** Undefined: no budget. In the chain's smallest native unit. */
    readonly budget: bigint | undefined,
    private readonly now: () => number = Date.now,
    /** The service-wide figures since a time (the journal's). */
    private readonly exposureSince?: (since: Date) => Promise<FailedFeeExposure>,
    /** The share of the budget one account may use (0 < share ≤ 1). */
    private readonly accountShare: number = DEFAULT_ACCOUNT_SHARE,
  ) {}

  /**
   * Reads the service-wide figures now (at start, and before a reservation
   * when they are stale). A failed read keeps the last figures: this
   * process's own count still bounds what it sends.
   */
  refresh(): Promise<void> {
    if (!this.exposureSince || this.budget === undefined) return Promise.resolve();
    if (this.refreshing) return this.refreshing;
    const readAt = this.now();
    this.refreshing = this.exposureSince(new Date(readAt - WINDOW_MS))
      .then(({ reverted, inFlight, accounts, oldestFailure }) => {
        if (readAt >= this.recorded.readAt) {
          this.endedSinceJournaled = this.endedSinceJournaled.filter((e) => e.endedAt >= readAt);
          this.recorded = {
            reverted,
            inFlight,
            accounts: accounts ?? new Map(),
            oldestFailure: oldestFailure?.getTime(),
            readAt,
          };
        }
      })
      .catch(() => undefined)
      .finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  /**
   * Holds `worst` (what the transaction costs at most if it fails) until
   * `finish`; throws FailedFeeBudgetSpentError when it does not fit.
   */
  reserve(
    worst: bigint,
    account: string | undefined = currentSettlement()?.account,
    payerKnown: boolean | undefined = currentSettlement()?.payerKnown,
    /** Whether the payer's address carries code (undefined: not read, or the family has none). */
    payerHasCode?: boolean,
  ): symbol {
    const token = Symbol("in-flight");
    if (this.now() - this.recorded.readAt > REFRESH_MS) void this.refresh();
    const budget = this.budget;
    if (budget !== undefined) {
      const used = this.spent() + this.inFlight();
      if (used + worst > budget) {
        throw new FailedFeeBudgetSpentError(this.network, this.retryAfter());
      }
      // The riskiest first (PAYER_TIERS). Failures only: honest sends in
      // flight (first payers among them) never close a tier, and neither
      // does this send's own worst fee.
      const failed = this.spent();
      for (const tier of PAYER_TIERS) {
        if (tier.applies(payerKnown, payerHasCode) && failed >= scale(budget, tier.from)) {
          throw new FailedFeeBudgetSpentError(this.network, this.retryAfter(), tier.scope);
        }
      }
      if (account !== undefined) {
        const own = this.accountExposure(account);
        // The share holds an account once it has failures of its own: until
        // then its sends are honest traffic, which the share must never cap
        // (the pool still counts them).
        if (
          own.failed > 0n &&
          own.failed + own.inFlight + worst > scale(budget, this.accountShare)
        ) {
          throw new FailedFeeBudgetSpentError(this.network, this.retryAfter(account), "account");
        }
        // The last quarter is kept for accounts whose settles have not failed.
        if (own.failed > 0n && used + worst > scale(budget, RESERVED_FROM)) {
          throw new FailedFeeBudgetSpentError(this.network, this.retryAfter(account), "account");
        }
      }
    }
    this.holds.set(token, { worst, journaledAt: undefined, account });
    return token;
  }

  /**
   * What one account's settlements failed for in the window, and what its
   * sends in flight could cost: the journal's figures, or this process's own
   * where they are higher, plus its holds the last read could not have seen.
   */
  accountExposure(account: string): { failed: bigint; inFlight: bigint } {
    const recorded = this.recorded.accounts.get(account) ?? { failed: 0n, inFlight: 0n };
    this.spent();
    const ownFailed = this.failures
      .filter((f) => f.account === account)
      .reduce((sum, f) => sum + f.fee, 0n);
    let unseen = 0n;
    for (const hold of this.holds.values()) {
      if (hold.account !== account) continue;
      if (hold.journaledAt === undefined || hold.journaledAt >= this.recorded.readAt) {
        unseen += hold.worst;
      }
    }
    return {
      failed: ownFailed > recorded.failed ? ownFailed : recorded.failed,
      inFlight: floorZero(recorded.inFlight - this.endedSinceRead(account)) + unseen,
    };
  }

  /** The held transaction's journal entry is written: a read that begins later counts it. */
  journaled(token: symbol): void {
    const hold = this.holds.get(token);
    if (hold && hold.journaledAt === undefined) hold.journaledAt = this.now();
  }

  /** The transaction ended: mined (`reverted` counts its fee), or never sent (no fee). */
  finish(token: symbol, reverted: boolean, fee: bigint): void {
    const hold = this.holds.get(token);
    if (!hold || !this.holds.delete(token)) return;
    const now = this.now();
    if (reverted && fee > 0n) this.failures.push({ at: now, fee, account: hold.account });
    // Only a journal read can have counted it (and reads that keep failing
    // leave the list to the hour's window).
    if (hold.journaledAt !== undefined && this.exposureSince) {
      if (this.endedSinceJournaled[0] && this.endedSinceJournaled[0].endedAt < now - WINDOW_MS) {
        this.endedSinceJournaled = this.endedSinceJournaled.filter(
          (e) => e.endedAt >= now - WINDOW_MS,
        );
      }
      this.endedSinceJournaled.push({
        worst: hold.worst,
        account: hold.account,
        journaledAt: hold.journaledAt,
        endedAt: now,
      });
    }
  }

  /**
   * What the last read counted in flight of this process's transactions
   * that have ended since (journaled before it began, ended after): without
   * this, a burst's reverts count twice until the next read, as failures
   * and as still in flight, and an honest settle elsewhere is refused.
   */
  private endedSinceRead(account?: string): bigint {
    const readAt = this.recorded.readAt;
    let sum = 0n;
    for (const e of this.endedSinceJournaled) {
      if (account !== undefined && e.account !== account) continue;
      if (e.journaledAt < readAt && e.endedAt >= readAt) sum += e.worst;
    }
    return sum;
  }

  /** What reverted transactions cost in the last hour: the service's, or this process's if higher. */
  spent(): bigint {
    const since = this.now() - WINDOW_MS;
    while (this.failures.length > 0 && this.failures[0]!.at <= since) this.failures.shift();
    const own = this.failures.reduce((sum, f) => sum + f.fee, 0n);
    return own > this.recorded.reverted ? own : this.recorded.reverted;
  }

  /**
   * What the transactions in flight could cost: every replica's as last
   * read, plus this process's that the read could not have seen.
   */
  inFlight(): bigint {
    let unseen = 0n;
    for (const hold of this.holds.values()) {
      if (hold.journaledAt === undefined || hold.journaledAt >= this.recorded.readAt) {
        unseen += hold.worst;
      }
    }
    return floorZero(this.recorded.inFlight - this.endedSinceRead()) + unseen;
  }

  /**
   * Until the oldest failure (the service's, or the account's own when the
   * account's share is what refused) leaves the window, or a few seconds
   * while only sends in flight hold it.
   */
  private retryAfter(account?: string): number {
    const own = this.failures.find((f) => account === undefined || f.account === account)?.at;
    const recorded = account === undefined ? this.recorded.oldestFailure : undefined;
    const oldest =
      own !== undefined && recorded !== undefined ? Math.min(own, recorded) : (own ?? recorded);
    if (oldest === undefined) return 10;
    return Math.max(1, Math.ceil((oldest + WINDOW_MS - this.now()) / 1000));
  }
}

const floorZero = (n: bigint) => (n > 0n ? n : 0n);

/** `share` of `amount`, in whole smallest units. */
function scale(amount: bigint, share: number): bigint {
  return (amount * BigInt(Math.round(share * 10_000))) / 10_000n;
}

/**
 * Notes in the current settlement's scope that the budget refused its
 * send, so the settle is answered 503 with `Retry-After` (or, when
 * something was sent for it already, with the refusal's reason).
 */
export function noteBudgetRefusal(e: FailedFeeBudgetSpentError): void {
  const scope = currentSettlement()?.notes;
  if (scope) {
    scope.refusal = {
      reason: Reason.failedSettlementGasBudgetSpent,
      message: e.message,
      retryAfterSeconds: e.retryAfterSeconds,
      budgetScope: e.scope,
    };
  }
}

/**
 * A family's `<PREFIX>_FAILED_FEE_BUDGET_<UNIT>` variable: an amount of the
 * native currency in whole units (up to `decimals` places), or `off` (no
 * budget), in the chain's smallest unit. Empty: `fallback`.
 */
export function parseFailedFeeBudget(
  env: NodeJS.ProcessEnv,
  name: string,
  decimals: number,
  fallback: string,
): bigint | undefined {
  const given = env[name]?.trim();
  const raw = given === undefined || given === "" ? fallback : given;
  if (raw === "off") return undefined;
  const match = /^(\d{1,15})(?:\.(\d+))?$/.exec(raw);
  if (!match || (match[2]?.length ?? 0) > decimals) {
    throw new ConfigError(
      `${name} must be an amount of the network's native currency (e.g. 0.5, at most ${decimals} decimals) or "off", got "${raw}"`,
    );
  }
  const fraction = (match[2] ?? "").padEnd(decimals, "0");
  return BigInt(match[1]!) * 10n ** BigInt(decimals) + BigInt(fraction || "0");
}
