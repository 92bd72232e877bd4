/**
 * The seam between the service and every chain family: what a family
 * (`src/chains/<family>/`) supplies, and the family-neutral ports it may use.
 * Nothing here names a chain. A family never imports a feature; nothing
 * outside `src/chains/` imports a family's folder: the service reaches a
 * family through the table in `src/chains/index.ts` and these interfaces.
 */
import type { PendingSettlementStore, x402Facilitator } from "@x402/core/facilitator";
import type { PaymentPayload, PaymentRequirements, SchemeNetworkServer } from "@x402/core/types";
import type { InspectedPayment, PaymentRequest } from "../protocol/index.js";
import type { Logger } from "../lib/logger.js";
import type { ConfigVariable } from "../lib/envVars.js";
import type { ConfidentialVaultFactory } from "./confidentialPort.js";

/** An asset a network settles, as `paymentRequirements.asset` names it. */
export interface AssetDescription {
  /** The asset id in requirements: a token address, a mint, a currency code, "XRP". */
  readonly id: string;
  readonly symbol: string;
  readonly decimals: number;
}

/** A network as the service describes it to people: the dashboard, the banner, docs. */
export interface NetworkDescription {
  /** CAIP-2 id. */
  readonly id: string;
  readonly name: string;
  readonly schemes: readonly string[];
  readonly assets: readonly AssetDescription[];
  /** A public explorer's transaction page, `{tx}` standing for the reference. */
  readonly explorerTx?: string;
  /**
   * The chain's native token, which pays for transactions: settlement fees
   * are stored in its smallest unit. Absent: not known here.
   */
  readonly native?: { readonly symbol: string; readonly decimals: number };
}

/**
 * A family before it is loaded: what the service may know of it without its
 * SDK (its networks, how its configuration reads, how its payments are
 * written), and how to load the rest. `src/chains/index.ts` lists one per
 * CAIP-2 namespace.
 */
export interface FamilyEntry<Setup = unknown, Settings = unknown> {
  /** CAIP-2 namespace: `eip155`, `solana`, `near`, `xrpl`, `starknet`. */
  readonly namespace: string;
  /** A name for people: "EVM", "Solana". */
  readonly label: string;
  readonly networks: readonly NetworkDescription[];
  /**
   * The one spelling of an asset id, for comparing (hex addresses without
   * case; Starknet felts without padding). Absent: ids compare as written.
   */
  assetKey?(id: string): string;
  /**
   * Whether the family's addresses are hex, the same in either case (EVM,
   * Starknet): stored in lower case so they compare. Absent: an address's
   * case is part of it (base58, XRPL r-addresses) and it is stored as written.
   */
  readonly hexAddresses?: true;
  readonly config: FamilyConfig<Setup, Settings>;
  /** Loads the family's code (and its SDK) and builds it. */
  load(): Promise<(setup: Setup, settings: Settings, ctx: FamilyContext) => Promise<ChainFamily>>;
  /**
   * How many verify threads the family's verifications earn (CPU-bound
   * signature checks), and from what rate they start; absent: none.
   */
  verifyThreads?(settings: Settings): { count: number; startAtPerSecond: number };
  /** Loads the confidential settlement vault client, for the family whose chain holds it. */
  confidentialVault?(): Promise<ConfidentialVaultFactory>;
  /**
   * Loads the family's `exact` server scheme, the one resource servers
   * price and offer with (the service uses it to sell its own plans).
   */
  exactServerScheme(): Promise<SchemeNetworkServer>;
}

/** How a family reads its environment variables (never `process.env` itself). */
export interface FamilyConfig<Setup, Settings> {
  /** Whether any variable that configures this family for production is set. */
  present(env: NodeJS.ProcessEnv): boolean;
  /** What to set to serve this family in production, for an error message. */
  readonly hint: string;
  /**
   * Every variable `parse` and `present` read, for docs/configuration.md
   * (`npm run docs:config`; a test fails when one read is missing).
   */
  readonly variables: readonly ConfigVariable[];
  /**
   * Parses the family's variables. `setup` (what to serve: networks, RPC
   * URLs, keys) is present only when configured for production; `settings`
   * (limits and switches) always, with defaults.
   */
  parse(
    env: NodeJS.ProcessEnv,
    mode: "devnet" | "production",
  ): { setup?: Setup; settings: Settings };
}

/** A payment after the family's last per-chain check, ready for the mechanism. */
export type PreparedPayment =
  { ok: true; requirements: PaymentRequirements } | { ok: false; reason: string; message: string };

/**
 * A transaction sent on behalf of a settlement, as the journal keeps it.
 * `reference` is the chain's own id for it (a hash or a signature); `detail`
 * is whatever the family needs to follow or re-send it after a crash (raw
 * bytes, nonce, last valid block height), stored as data.
 */
export interface JournalEntry {
  network: string;
  reference: string;
  /** Our account that sent it, when one of ours did (keyless families: absent). */
  signer?: string;
  /** The reference of the transaction this one replaces (a fee bump), if any. */
  replaces?: string;
  /**
   * The most it can cost the account that sends it if it fails on-chain, in
   * the chain's smallest native unit: counted against the failed-fee budget
   * of every replica while it is in flight (failedFeeBudget.ts). Absent: a
   * transaction that costs the service nothing (keyless families).
   */
  worstFee?: bigint;
  detail: Record<string, unknown>;
}

/**
 * Makes a family's sends durable. The implementation binds each entry to the
 * settlement running in the current async context, so mechanisms need not
 * carry the settlement id through code they do not own.
 *
 * Order for one transaction: `sent` (before it leaves: a crash right after can
 * be recovered by following or re-sending exactly it) → broadcast → `finished`.
 */
export interface TransactionJournal {
  sent(entry: JournalEntry): Promise<void>;
  /**
   * `fee`: what it cost the account that sent it, in the chain's smallest
   * native unit. `cause`: for a reverted one whose family reads who caused
   * it from the chain, that cause, kept with the entry so that every
   * replica and the reconciler decide alike.
   */
  finished(
    reference: string,
    status: "success" | "reverted",
    block?: bigint,
    fee?: bigint,
    cause?: FailureCause,
  ): Promise<void>;
  /**
   * Over every replica, for the transactions of `network` journaled since
   * `since` (the chain's smallest native unit): what those mined reverted
   * cost their senders, and what those still in flight could cost at most
   * (their `worstFee`). Absent: only this process knows.
   */
  failedFeeExposure?(network: string, since: Date): Promise<FailedFeeExposure>;
}

/** What the journal says of one network's window (see failedFeeBudget.ts). */
export interface FailedFeeExposure {
  /** What failed transactions cost (reverted, or mined for a settlement recorded failed). */
  reverted: bigint;
  /** What the transactions in flight could cost at most. */
  inFlight: bigint;
  /** The same two, per submitting account. */
  accounts?: ReadonlyMap<string, { failed: bigint; inFlight: bigint }>;
  /** When the window's oldest failed transaction was journaled. */
  oldestFailure?: Date | undefined;
}

/**
 * The service's hourly budget for transactions that fail on-chain on a
 * network is spent (see failedFeeBudget.ts): nothing was sent, and the
 * settle is answered 503 with `Retry-After`.
 */
export class FailedFeeBudgetSpentError extends Error {
  constructor(
    readonly network: string,
    readonly retryAfterSeconds: number,
    /**
     * Whose budget: the network's, the submitting account's share of it,
     * or a tier of it kept from the riskiest payers (no success on record,
     * code at the address: failedFeeBudget.ts).
     */
    readonly scope: "network" | "account" | "new-payer" | "payer-with-code" = "network",
  ) {
    super(budgetRefusalMessage(network, retryAfterSeconds, scope));
    this.name = "FailedFeeBudgetSpentError";
  }
}

function budgetRefusalMessage(
  network: string,
  retryAfterSeconds: number,
  scope: FailedFeeBudgetSpentError["scope"],
): string {
  const resume = `resume in ${retryAfterSeconds} s`;
  switch (scope) {
    case "account":
      return `this account's settlements that failed on-chain on ${network} in the last hour used its share of the service's budget for such failures; its settles there ${resume}`;
    case "new-payer":
      return `settlements that failed on-chain on ${network} in the last hour spent half of the service's budget for them, and what is left is kept for payers with a settled payment on record; this payer has none, so its settles there ${resume}`;
    case "payer-with-code":
      return `settlements that failed on-chain on ${network} in the last hour spent part of the service's budget for them, and payers whose address carries code (a contract wallet or a delegated account) are refused first; this payer's settles there ${resume}`;
    default:
      return `the service's hourly budget for settlements that fail on-chain on ${network} is spent; settles there ${resume}`;
  }
}

export const noopJournal: TransactionJournal = {
  async sent() {},
  async finished() {},
};

/**
 * Why a payer's gas is not funded: it was funded before and that payment did
 * not settle, or the settling account's budget is spent. The family answers
 * its own reason for each.
 */
export interface FundingRefusal {
  kind: "already_funded" | "budget_spent";
  message: string;
}

/**
 * The record of gas given to payers so they can send their own transaction
 * (an approve the service relays), kept so a stranger is funded once: a
 * payer funded whose payment did not settle is not funded again, and each
 * account's fundings are budgeted. Bound to the settlement in the current
 * scope, like the journal.
 */
export interface SponsoredFundings {
  /** Why this payer may not be funded now; undefined when it may. Reads only. */
  refusal(network: string, payer: string): Promise<FundingRefusal | undefined>;
  /**
   * Records a funding of `wei` before it is sent, unless the payer holds an
   * unsettled funding already or the settling account's budget is spent
   * (then the refusal, and nothing recorded). Atomic across replicas for
   * one payer.
   */
  reserve(network: string, payer: string, wei: bigint): Promise<FundingRefusal | undefined>;
  /** A reserved funding that was not sent after all. */
  release(network: string, payer: string): Promise<void>;
}

/** No record: every payer may be funded (tests of a family alone, verify threads). */
export const unrecordedFundings: SponsoredFundings = {
  async refusal() {
    return undefined;
  },
  async reserve() {
    return undefined;
  },
  async release() {},
};

/**
 * Which of a family's accounts this replica may use now. With one replica it
 * holds them all; replicas sharing a database each hold a fair share, and a
 * dead replica's share passes on when its leases expire.
 */
export interface SignerLeases {
  /**
   * Renews this holder's leases and takes or gives up accounts to reach a
   * fair share. `releasable` are held accounts with nothing in flight.
   * Returns the addresses (lower-case) this holder may use until the next call.
   */
  sync(args: {
    network: string;
    addresses: readonly string[];
    holder: string;
    ttlMs: number;
    releasable: readonly string[];
  }): Promise<string[]>;
  /** Gives up every lease of this holder (clean shutdown). */
  releaseAll(holder: string): Promise<void>;
}

/** What the chain says became of a settlement whose outcome was not recorded. */
export type ReconcileOutcome =
  | { status: "succeeded"; transaction: string }
  | {
      status: "failed";
      reason: string;
      message: string;
      transaction?: string;
      /** Who caused it, when the chain's own word on the transaction says (see `failureCause`). */
      cause?: FailureCause;
    }
  | { status: "pending"; transaction?: string };

export interface PendingSettlement {
  /** The settlement's id: what a re-land sends is journaled against it. */
  id?: string;
  network: string;
  request: PaymentRequest;
  /**
   * The transactions journaled for it, oldest first, each with the cause of
   * its failure when one was journaled with its final word.
   */
  transactions: readonly (JournalEntry & { cause?: FailureCause })[];
}

/**
 * Thrown (or used as a `cause`) when a chain could not be asked: RPC
 * unreachable, timed out, or answering 5xx. Never the payer's fault: the
 * service answers 503 and records nothing against the payer.
 */
export class ChainUnavailableError extends Error {
  constructor(
    readonly network: string,
    message: string,
    opts: { cause?: unknown } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = "ChainUnavailableError";
  }
}

export interface NetworkProbe {
  network: string;
  /** Whether the network's RPC answered a cheap read just now. */
  reachable: boolean;
  /** The host that answered or failed (never a full URL: those carry provider keys). */
  host?: string;
  error?: string;
}

export type TransactionPhase = "broadcast" | "inclusion";

/**
 * What the composition root hands every family's factory: the service-wide
 * settings and ports a family may use, and nothing else.
 */
export interface FamilyContext {
  log: Logger;
  journal: TransactionJournal;
  /** Gas given to payers for their own transactions, once each and within a budget. */
  sponsoredFundings?: SponsoredFundings;
  /** Shares the family's accounts between replicas (one holder per process). */
  leases: { port: SignerLeases; holder: string; ttlMs?: number; heartbeatMs?: number };
  /** Bound on every wait for a transaction's outcome; past it, `settlement_pending`. */
  settleTimeoutMs: number;
  /**
   * A sending account's balance was read: whether it is in the rotation, its
   * balance and the floor below which it leaves it, both in whole native
   * units (the service turns them into metrics, so an alert can fire before
   * the floor is reached).
   */
  onSignerHealth: (
    network: string,
    address: string,
    healthy: boolean,
    balance: number,
    floor: number,
  ) => void;
  /**
   * How long a settlement transaction took to broadcast (everything before
   * the node accepted it) and to be included (from then to its receipt).
   * A family that cannot tell the two apart reports neither.
   */
  onTransactionPhase?: (network: string, phase: TransactionPhase, seconds: number) => void;
  /** Tests poll faster than a chain's block time. */
  pollingIntervalMs?: number;
  /**
   * Shared store of settlements answered `settlement_pending`, for
   * mechanisms that follow a retry's transaction by it (`@x402/core`'s port).
   */
  pendingSettlements?: PendingSettlementStore;
  /** Told whether the family's signature checks run on native code (a metric). */
  onNativeRecovery?: (active: boolean) => void;
  /** What one of our transactions cost, in whole native units, once mined (a metric). */
  onFeePaid?: (network: string, status: "success" | "reverted", fee: number) => void;
  /**
   * Each network's hourly budget for failed settlements, in whole native
   * units (a metric); every family that pays fees reports its own.
   */
  onFailedGasBudget?: (network: string, budget: number) => void;
  /** The confidential settlement vault, whose payments its family collects through it. */
  confidentialVault?: { network: string; address: `0x${string}` };
}

/**
 * A payment as the engine read it at the edge, with the family that serves
 * its network (undefined: none does). The service's stages carry it, so the
 * engine settles and verifies it without routing the request a second time.
 */
export interface RoutedPayment extends InspectedPayment {
  readonly family: ChainFamily | undefined;
}

/**
 * Thrown when a settlement stopped before anything was sent because a store
 * it needs (the journal's database) failed: nobody's fault, answered 503.
 */
export class NothingSentError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "NothingSentError";
  }
}

/**
 * Who a settlement's on-chain failure is charged to: the payer (cooling),
 * the requirements (the account's failure limit), or the service (a refusal
 * of ours after something was sent: nobody's limit, nobody cooled).
 */
export type FailureCause = "payer" | "requirements" | "service";

/**
 * What a family says about a payment from the payload alone, before and
 * without its chain: its networks, who pays, which signed authorization it
 * carries and what a replay of it is answered, what it costs in quota, and
 * whether it is well formed. Pure: no member reads the chain or holds state
 * beyond the family's configuration.
 */
export interface FamilyPaymentIdentity {
  /** CAIP-2 namespace: `eip155`, `solana`, `near`, `xrpl`, `starknet`. */
  readonly family: string;
  /** The key of `GET /supported`'s `signers` its addresses are listed under. */
  readonly signersKey: string;
  /**
   * Whether `paymentRequirements.amount` may be a decimal value (issued
   * currencies) rather than whole smallest units.
   */
  readonly decimalAmounts: boolean;
  /** CAIP-2 ids served, with the schemes registered on each. */
  networks(): ReadonlyMap<string, readonly string[]>;
  /** The payer a payload names (as claimed, before verification), if any. */
  payerOf(payload: PaymentPayload, requirements: PaymentRequirements): string | undefined;
  /**
   * A key that is the same for every copy of one signed authorization and
   * differs between authorizations (EVM: token, payer and nonce; Solana: the
   * transaction message hash). Duplicates of one key settle once.
   */
  authorizationKey(payload: PaymentPayload, requirements: PaymentRequirements): string | undefined;
  /**
   * The reason a settle of an authorization that was already consumed (or
   * whose nonce another signed payment reuses) is refused with: the
   * family's own nonce reason, as its chain would answer, or
   * `duplicate_settlement` for a family whose chain has none.
   */
  replayReason(payload: PaymentPayload, requirements: PaymentRequirements): string;
  /**
   * Whether a payload is an operation anyone may run again (see
   * `InspectedPayment.repeatable`); a family with no such payload answers
   * false.
   */
  repeatable(payload: PaymentPayload, requirements: PaymentRequirements): boolean;
  /** See `InspectedPayment.pendingKey`; absent for a family whose mechanisms keep none. */
  pendingKey?(payload: PaymentPayload): string | undefined;
  /**
   * The reason the service answers for one its mechanisms gave, where the
   * specification spells the same condition otherwise; a family whose
   * mechanisms already use the specification's words returns it as given.
   */
  publicReason(reason: string): string;
  /** Quota units a settlement of this payload costs (0: never counted). */
  quotaUnits(payload: PaymentPayload, requirements: PaymentRequirements): number;
  /** A message naming the first malformed field of a scheme payload, or undefined. */
  shapeError(payload: PaymentPayload, requirements: PaymentRequirements): string | undefined;
}

/**
 * What a family does against its chains: its mechanisms on the engine, its
 * lifecycle, what it reads and sends to verify, settle and reconcile, and
 * what it knows of its RPC's health. Every member is stated by every
 * family; where a family has no such behaviour it says so (`false`, `null`,
 * or a function giving the answer the service would otherwise assume).
 */
export interface FamilyRuntime {
  /** Registers the family's mechanisms on the shared engine (once, before start). */
  register(engine: x402Facilitator): void;
  start(): Promise<void>;
  /** Stops timers and hands back leases; in-flight work has finished by then. */
  close(): Promise<void>;
  /** Checks and completes requirements with what only the chain knows. Sends nothing. */
  prepare(payload: PaymentPayload, requirements: PaymentRequirements): Promise<PreparedPayment>;
  /** The latest block/slot/ledger number, cached for a fraction of a block (verify cache key). */
  currentBlock(network: string): Promise<bigint | undefined>;
  /** What became of a settlement from the chain alone; may re-send exactly a journaled transaction. */
  reconcile(pending: PendingSettlement): Promise<ReconcileOutcome>;
  /**
   * True when this family answers `success` only once the chain is final
   * (XRPL's validated ledger, NEAR's final block): no reorg can take such a
   * success back, so the reorg watch leaves its networks alone. False: the
   * reorg watch follows its successes.
   */
  readonly successIsFinal: boolean;
  /**
   * Of these transactions of `network`, the ones the chain still holds as
   * landed and succeeded, asked in as few reads as the chain allows (the
   * reorg watch's common case, where nothing was taken back). Leaving one
   * out is not a verdict: the watch then asks `reconcile` about it. Returns
   * a subset of the strings given. Null: the family has no such read, and
   * the reorg watch asks every success through `reconcile`, one at a time.
   */
  readonly stillLanded:
    ((network: string, references: readonly string[]) => Promise<ReadonlySet<string>>) | null;
  /**
   * A success a reorg took back whose journaled transaction can no longer
   * be mined (another transaction took its nonce): sends the same call
   * again, from the same account at a new nonce and journaled against the
   * settlement, when the payer's authorization can still land (`pending`,
   * with the new reference); `failed` when it cannot. It cannot move money
   * twice: the call carries the payer's one-time authorization, which any
   * transaction may spend once. Null: the family cannot, and such a success
   * is recorded failed.
   */
  readonly reland:
    ((pending: PendingSettlement & { id: string }) => Promise<ReconcileOutcome>) | null;
  /**
   * Who caused a settlement that failed on-chain: the payer, only on
   * evidence read from `transaction` (the one that failed) at its block and
   * from what the payer signed, or the requirements (what the account asked
   * for).
   */
  failureCause(
    payload: PaymentPayload,
    requirements: PaymentRequirements,
    transaction?: string,
  ): Promise<FailureCause>;
  /** A cheap read against each network's RPC, for /ready and the reachability gauge. */
  probe(): Promise<NetworkProbe[]>;
  /**
   * Whether a call to `network`'s RPC failed for a transport reason (down,
   * timeout, 5xx) at or after `sinceMs`. A mechanism we do not own may turn
   * such a failure into a payment reason (an unreadable signature check
   * reads as a bad signature); the service asks this before it believes a
   * refusal. A family whose mechanisms throw `ChainUnavailableError`
   * themselves answers false.
   */
  rpcFailedSince(network: string, sinceMs: number): boolean;
  /**
   * A value that names the chain itself (EVM: the hash of block 0). When it
   * differs from the one the database knew, the chain was replaced (a devnet
   * restarted fresh, an RPC pointed elsewhere) and older records must not be
   * reconciled against it. Null: the family has no such value, and its
   * networks' records are never checked against a replaced chain.
   */
  readonly identity: ((network: string) => Promise<string | undefined>) | null;
}

/**
 * One chain family: what it says about a payment, and what it does on its
 * chains. Adding a family is a folder implementing this, one line in the
 * composition root, its registry data and its devnet.
 */
export type ChainFamily = FamilyPaymentIdentity & FamilyRuntime;
