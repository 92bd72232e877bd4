/**
 * The confidential settlement vault as the service uses it: the port between
 * the feature (src/features/confidential: scheduling, records, answers) and
 * the chain side that implements it (src/chains/evm/confidential). Every
 * write is safe to repeat: the contract refuses a second slot for a merchant,
 * a second collect of a payment, a second credit of a slot for a day and a
 * second finalization.
 */
import type { Address, Hex } from "viem";
import type { ConfidentialReceipt } from "../clients/confidential/receipts.js";

/**
 * The chain's address and wallet-signature checks the feature makes (a
 * merchant's checksummed address, its wallet's signed enablement and
 * withdrawal, a chain error's short message), offered here so the feature
 * names no chain library: the vault's chain decides which one answers.
 */
export {
  BaseError,
  getAddress,
  isAddress,
  verifyMessage,
  verifyTypedData,
  type Address,
  type Hex,
  type TypedDataDefinition,
} from "viem";

/**
 * A payment's key, blinding and commitment to a slot, as the vault and the
 * merchants' tools compute them: the feature finds which merchant a
 * committed payment belongs to with them.
 */
export { paymentBlinding, paymentCommitment } from "../clients/confidential/receipts.js";

/** The network confidential settlement runs on (spec 2.7: the first EVM network). */
export const CONFIDENTIAL_NETWORK = "eip155:8453" as const;

/** The UTC day number of an instant (days since the Unix epoch), as the contract counts days. */
export function utcDay(at: Date): number {
  return Math.floor(at.getTime() / 86_400_000);
}

/**
 * A signed withdrawal request, as the chain knows it:
 * - `unused`: its nonce is still free, so it can land until its deadline
 *   (and never after);
 * - `landed`: this very request (slot, address, nonce, amount) was taken, as
 *   withdrawal `id`;
 * - `usedByAnother`: another request took its nonce, so this one can never
 *   land and debited nothing.
 */
export type WithdrawalLookup =
  { state: "unused" } | { state: "landed"; id: bigint } | { state: "usedByAnother" };

export type WithdrawRequest = {
  slot: bigint;
  /** The slot's withdrawal address; its wallet signs the request. */
  to: Address;
  amount: bigint;
  /** The slot's next withdrawal nonce (the contract's `slotInfo`). */
  nonce: bigint;
  /** Unix seconds after which the request is refused. */
  deadline: bigint;
};

/** The EIP-712 types of a withdrawal request. */
export const WITHDRAW_TYPES = {
  Withdraw: [
    { name: "slot", type: "uint256" },
    { name: "to", type: "address" },
    { name: "amount", type: "uint64" },
    { name: "nonce", type: "uint64" },
    { name: "deadline", type: "uint64" },
  ],
} as const;

/** The EIP-712 withdrawal request, as the merchant's wallet signs it. */
interface WithdrawTypedData {
  domain: { name: string; version: string; chainId: number; verifyingContract: Address };
  types: typeof WITHDRAW_TYPES;
  primaryType: "Withdraw";
  message: WithdrawRequest;
}

/**
 * A confidential payment's receipt: the opening (slot and blinding) of the
 * commitment the vault stored when it collected the payment, with what the
 * vault recorded. Unsigned: it is good exactly when it opens that commitment.
 */
export type { ConfidentialReceipt };

/** A slot's share of a day's pool: the sum of its merchant's payments collected that day. */
export interface DayCredit {
  slot: bigint;
  amount: bigint;
}

/** `redeemed`: credited to its slot by its receipt (the opening), on-chain. */
export type PaymentState = "none" | "collected" | "redeemed" | "returned";

/** What the vault collected for one authorization (state `none`: nothing). */
export interface CollectedPayment {
  key: Hex;
  state: PaymentState;
  payer: Address;
  amount: bigint;
  /** The UTC day the vault collected it in: the day whose pool it joined. */
  day: number;
  /** Its commitment to a slot, stored at collect (zero: unattributed, returnable). */
  commitment: Hex;
}

/**
 * `closed`: the KMS proved the split adds up; its challenge window runs,
 * then its credits are released. `disputed`: a challenge proved a slot's
 * credit short (the bond paid the shortfall); nothing of the split is
 * released, and no day closes until the bond owner resumes (which reopens it).
 */
export type DayPhase = "open" | "closing" | "closed" | "disputed";

/** A day as the vault keeps it. */
export interface DayInfo {
  day: number;
  collected: bigint;
  payments: number;
  redeemed: bigint;
  returned: bigint;
  /** What the day's credits must add up to: collected, less redeemed and returned. */
  pool: bigint;
  /** Bumped each time the KMS proved an attempt's credits wrong. */
  attempt: number;
  slotsCredited: number;
  slotsReleased: number;
  phase: DayPhase;
  /** Chain time (s) until which its merchants may challenge it (0: not closed). */
  challengeWindowEndsAt: bigint;
  /** Challenges of its current attempt waiting for the KMS's answer; the day is not released meanwhile. */
  openChallenges: number;
}

/** A payment attributed to a slot, as `collect` will carry it. */
interface PaymentAttribution {
  key: Hex;
  blinding: Hex;
  commitment: Hex;
}

interface CreditDayResult {
  txHashes: Hex[];
  /** Slots that an earlier run had credited for the day already (skipped now). */
  alreadyCredited: bigint[];
  /** Slots credited by this call. */
  credited: bigint[];
  /** The day's pool as closed on-chain. */
  total: bigint;
  /** Payments sent back to their payers by this call. */
  returned: Hex[];
  /**
   * Closed, but not released yet: its challenge window ends then (chain
   * time, s), or challenges of it are open. Call again after it.
   */
  releasableAfter: bigint | null;
}

/**
 * A challenge proved the day's split short: nothing of it is released, and
 * the vault refuses every close until the bond owner resumes.
 */
export class DayDisputedError extends Error {
  constructor(readonly day: number) {
    super(
      `day ${day} is disputed: a challenge proved its split short; no day closes until the bond owner resumes`,
    );
  }
}

/**
 * The KMS proved that an attempt's credits did not add up to the day's pool
 * (a redemption or a return changed it meanwhile, or the credits were
 * wrong): the vault discarded them and the day is open for a new attempt.
 */
export class DayRejectedError extends Error {
  constructor(
    readonly day: number,
    readonly attempt: number,
  ) {
    super(`the vault rejected attempt ${attempt} of day ${day}: its credits did not add up`);
    this.name = "DayRejectedError";
  }
}

export type WithdrawalState = "debited" | "finalized" | "cancelled";

export interface WithdrawalInfo {
  id: bigint;
  state: WithdrawalState;
  slot: bigint;
  to: Address;
  amount: bigint;
  requestedAt: bigint;
  /** From then on the withdrawal address may cancel it on-chain. */
  cancellableAt: bigint;
  /** The encrypted "debited" flag; publicly decryptable. */
  debitedHandle: Hex;
  /** Once finalized: whether the USDC was paid out (the balance covered it). */
  paid: boolean;
}

export interface ConfidentialVault {
  readonly address: Address;
  readonly asset: Address;
  readonly network: typeof CONFIDENTIAL_NETWORK;
  readonly operator: Address;
  /** Seconds between a day's close and the release of its credits. */
  readonly challengeWindow: bigint;
  /** What a proven shortfall pays from the bond besides it (USDC base units): once, and per opening. */
  readonly challengeBounty: { base: bigint; perOpening: bigint };
  /** What the merchant's wallet signs (personal_sign) to enable. */
  enablementMessage(merchant: Address, accountRef: string): string;
  /**
   * Checks the wallet's signature and binds a slot to the merchant. Idempotent
   * for the same merchant and signature (an ordinary wallet's signature is
   * deterministic); `txHash` is null when the slot was already assigned.
   */
  assignSlot(args: {
    merchant: Address;
    accountRef: string;
    walletSignature: Hex;
    /**
     * The slot's viewer: an address of the merchant's own tools, unlinkable
     * to its wallet, that may decrypt every pending credit and balance of
     * the slot (null: none). Fixed with the slot; ignored when the slot was
     * already assigned.
     */
    viewer?: Address | null;
  }): Promise<{ slot: bigint; txHash: Hex | null; secret: Hex }>;
  /** The viewer the slot was assigned with (null: none). */
  viewerOf(slot: bigint): Promise<Address | null>;
  /** How the vault names a payment: payer and nonce (EIP-3009 nonces are per payer). */
  paymentKey(payer: Address, nonce: Hex): Hex;
  /** What the vault collected for a payment. */
  payment(key: Hex): Promise<CollectedPayment>;
  /** A day's totals and phase. */
  dayInfo(day: number): Promise<DayInfo>;
  /** Every payment the vault collected on `day` (a ledger no one can rewrite). */
  dayPayments(day: number): Promise<CollectedPayment[]>;
  /**
   * Attributes a payment to a slot before it is collected: its commitment
   * (blinding derived from the slot's `salt` and the payment's key) and the
   * operator's signature of it, which the family's collecting signer adds
   * to the payment's `collect`. Deterministic: the same payment gets the
   * same attribution on every replica.
   */
  attribute(args: {
    payer: Address;
    nonce: Hex;
    slot: bigint;
    salt: Hex;
  }): Promise<PaymentAttribution>;
  /**
   * A collected payment's receipt for `slot`: its opening and the vault's
   * record. Throws when the vault has no such payment, or bound it to
   * anything but this opening.
   */
  receiptOf(args: {
    payer: Address;
    nonce: Hex;
    slot: bigint;
    salt: Hex;
  }): Promise<ConfidentialReceipt>;
  /** Whether a payment was presented in a challenge of its day's current attempt. */
  presented(key: Hex): Promise<boolean>;
  /** What the bond paid into `slot`'s balance for shortfalls of `day`'s splits (every attempt). */
  penaltiesPaid(slot: bigint, day: number): Promise<bigint>;
  /**
   * The challenge bounties the bond paid into `slot`'s balance besides those
   * shortfalls, for the openings that proved them (every attempt).
   */
  bountiesPaid(slot: bigint, day: number): Promise<bigint>;
  /**
   * Presents receipts (all of one day and slot) against the slot's credit
   * of that day, from the operator key (anyone may send it): what the
   * service does when a closed split differs from its own plan.
   */
  challenge(receipts: readonly ConfidentialReceipt[]): Promise<Hex>;
  /**
   * The daily batch of `day` (a UTC day that has ended and is not closed;
   * any later day, so a day whose batch did not run is closed late): sends
   * `returns` back to their payers, writes every slot's encrypted credit
   * into its pending bucket (`credits` lists the slots that earned, every
   * other slot gets an encrypted zero), closes the day, finalizes it with
   * the KMS proof that the credits add up to the pool, and releases the
   * credits into the balances. Safe to call again after a crash at any
   * point, and on a closed day (it releases whatever is left). Throws
   * `DayRejectedError` when the KMS proves the credits wrong; throws before
   * sending credits that do not add up to the pool.
   */
  creditDay(args: {
    day: number;
    credits: readonly DayCredit[];
    returns?: readonly Hex[];
    /** Asked before each transaction: true stops the run (another replica took the batch). */
    shouldStop?: () => boolean;
  }): Promise<CreditDayResult>;
  /** The request for the merchant's wallet to sign, with the slot's next nonce. */
  prepareWithdraw(args: {
    slot: bigint;
    merchant: Address;
    amount: bigint;
    validForSeconds?: bigint;
  }): Promise<{ request: WithdrawRequest; typedData: WithdrawTypedData }>;
  withdrawTypedData(request: WithdrawRequest): WithdrawTypedData;
  /** What the chain says of a signed request's nonce (see `WithdrawalLookup`). */
  findWithdrawal(request: WithdrawRequest): Promise<WithdrawalLookup>;
  /**
   * Debits obliviously. Idempotent: a request already submitted returns its
   * withdrawal; one whose nonce another request used throws.
   */
  submitWithdraw(args: {
    request: WithdrawRequest;
    secret: Hex;
    signature: Hex;
  }): Promise<{ withdrawalId: bigint; txHash: Hex | null }>;
  /**
   * Pays a debited withdrawal out with the KMS proof of its outcome.
   * `paid` false: the balance was short, nothing moved. Idempotent.
   */
  finalizeWithdraw(
    withdrawalId: bigint,
  ): Promise<{ txHash: Hex | null; paid: boolean; amount: bigint; state: WithdrawalState }>;
  withdrawal(withdrawalId: bigint): Promise<WithdrawalInfo>;
  /**
   * The slot's credit of `day` as the closed split wrote it, decrypted with
   * the operator's ACL permission; null when it holds none (not credited in
   * the current attempt, or released).
   */
  dayCredit(slot: bigint, day: number): Promise<bigint | null>;
  /** The slot's available balance, decrypted with the operator's ACL permission. */
  balance(slot: bigint): Promise<bigint>;
  /** Chain time (seconds): the batch window and the redemption rules use it. */
  chainTime(): Promise<bigint>;
  close(): Promise<void>;
}

/** The part of Zama's relayer SDK `FhevmInstance` the vault uses (the devnet's mock has it too). */
export interface FhevmInstanceLike {
  createEncryptedInput(
    contractAddress: string,
    userAddress: string,
  ): {
    add64(value: bigint): unknown;
    encrypt(): Promise<{ handles: Uint8Array[]; inputProof: Uint8Array }>;
  };
  publicDecrypt(handles: string[]): Promise<{
    clearValues: Record<string, bigint | boolean | string>;
    abiEncodedClearValues: string;
    decryptionProof: string;
  }>;
  generateKeypair(): { publicKey: string; privateKey: string };
  createEIP712(
    publicKey: string,
    contractAddresses: string[],
    startTimestamp: number,
    durationDays: number,
  ): {
    domain: Record<string, unknown>;
    types: Record<string, { name: string; type: string }[]>;
    primaryType?: string;
    message: Record<string, unknown>;
  };
  userDecrypt(
    handles: { handle: string; contractAddress: string }[],
    privateKey: string,
    publicKey: string,
    signature: string,
    contractAddresses: string[],
    userAddress: string,
    startTimestamp: number,
    durationDays: number,
  ): Promise<Record<string, bigint | boolean | string>>;
}

/** Where the fhEVM lives for a chain, and the relayer in front of its KMS. */
export interface FhevmNetworkSettings {
  relayerUrl: string;
  /** The relayer's API key (its `x-api-key` header). */
  relayerApiKey?: string;
  aclAddress: Address;
  executorAddress: Address;
  kmsVerifierAddress: Address;
  inputVerifierAddress: Address;
  /** The gateway chain's decryption contract (the KMS signatures' EIP-712 verifyingContract). */
  decryptionAddress: Address;
  /** The gateway chain's input verification contract (the input proofs' verifyingContract). */
  inputVerificationAddress: Address;
  gatewayChainId: number;
}

/**
 * One holder of the operator key at a time, across replicas: its
 * transactions take the account's next nonce, so two replicas sending at
 * once would collide (and two finalizing the same withdrawal would revert).
 */
export interface OperatorKeyLease {
  /**
   * Runs `work` while this replica alone may send with the operator key.
   * `work` calls `held.ensureHeld()` right before each transaction it sends.
   */
  hold<T>(work: (held: OperatorKeyHold) => Promise<T>): Promise<T>;
}

/** The lease as its holder sees it while it works. */
export interface OperatorKeyHold {
  /**
   * Throws when the lease may have passed to another replica: a renewal
   * failed, or none succeeded within the lease's term (a stalled
   * database). Nothing more may be sent with the key under this hold.
   */
  ensureHeld(): void;
}

interface ConfidentialVaultLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** How to reach a vault: its chain, its contract, the service's keys for it, and the fhEVM. */
export interface ConfidentialVaultOptions {
  rpcUrl: string;
  chainId: number;
  contractAddress: Address;
  /**
   * Attributes payments (signs each commitment `collect` stores), assigns
   * slots, submits batches, withdrawals and finalizations, and pays their gas.
   */
  operatorKey: Hex;
  /**
   * Zama's relayer and the chain's fhEVM addresses, or (devnet and tests) a
   * starter of an in-process mock coprocessor and KMS with the relayer
   * SDK's interface, which the caller supplies (devnet/evm/fhevm.ts): nothing
   * in the service loads the devnet.
   */
  mode:
    FhevmNetworkSettings | { mock: () => Promise<{ instance: FhevmInstanceLike; close(): void }> };
  log?: ConfidentialVaultLog;
  /** Shares the operator key with other replicas; absent: this process alone sends with it. */
  operatorLease?: OperatorKeyLease;
  /** Slots per `creditSlots` transaction (1…16). Default 16. */
  slotsPerTransaction?: number;
}

/** Builds a vault client (the family that runs the vault's chain supplies it). */
export type ConfidentialVaultFactory = (
  opts: ConfidentialVaultOptions,
) => Promise<ConfidentialVault>;
