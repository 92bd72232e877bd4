/**
 * The confidential settlement vault as the service uses it: the port between
 * the feature (src/features/confidential: scheduling, records, answers) and
 * the chain side that implements it (src/chains/evm/confidential). Every
 * write is safe to repeat: the contract refuses a second slot for a merchant,
 * a second credit of a slot for a day and a second finalization.
 */
import type { Address, Hex } from "viem";

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

export interface SignedReceipt {
  /** Amounts and slot as decimal strings, ready for JSON. */
  receipt: {
    payer: Address;
    nonce: Hex;
    merchant: Address;
    slot: string;
    amount: string;
    day: number;
  };
  /** Our EIP-712 signature over it (domain: `vaultDomain`). */
  signature: Hex;
  /** How the contract names the payment. */
  key: Hex;
}

export interface DayCredit {
  slot: bigint;
  /** The slot's total for the day: must equal the sum of its receipts. */
  amount: bigint;
  receipts: { payer: Address; nonce: Hex; amount: bigint }[];
}

interface CreditDayResult {
  txHashes: Hex[];
  /** Slots that an earlier run had credited for the day already (skipped now). */
  alreadyCredited: bigint[];
  /** Slots credited by this call. */
  credited: bigint[];
  /** The day's receipt total as booked on-chain. */
  total: bigint;
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
}

export interface ConfidentialVault {
  readonly address: Address;
  readonly asset: Address;
  readonly network: typeof CONFIDENTIAL_NETWORK;
  readonly operator: Address;
  readonly receiptSigner: Address;
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
  }): Promise<{ slot: bigint; txHash: Hex | null; secret: Hex }>;
  signReceipt(args: {
    paymentNonce: Hex;
    payer: Address;
    merchant: Address;
    slot: bigint;
    amount: bigint;
    /** UTC day number of the settlement; default: today. */
    day?: number;
  }): Promise<SignedReceipt>;
  /**
   * The daily batch of `day` (a UTC day number that has ended; run during
   * the day after it). `credits` lists the slots that earned; every other
   * slot is credited an encrypted zero.
   */
  creditDay(args: { day: number; credits: readonly DayCredit[] }): Promise<CreditDayResult>;
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

interface ConfidentialVaultLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** How to reach a vault: its chain, its contract, the service's keys for it, and the fhEVM. */
export interface ConfidentialVaultOptions {
  rpcUrl: string;
  chainId: number;
  contractAddress: Address;
  /** Assigns slots, submits batches, withdrawals and finalizations, and pays their gas. */
  operatorKey: Hex;
  /** Signs receipts; the contract's `receiptSigner`. */
  receiptSignerKey: Hex;
  /**
   * Zama's relayer and the chain's fhEVM addresses, or (devnet and tests) a
   * starter of an in-process mock coprocessor and KMS with the relayer
   * SDK's interface, which the caller supplies (devnet/fhevm.ts): nothing
   * in the service loads the devnet.
   */
  mode:
    FhevmNetworkSettings | { mock: () => Promise<{ instance: FhevmInstanceLike; close(): void }> };
  log?: ConfidentialVaultLog;
  /** Slots per `creditSlots` transaction (1…32). Default 16. */
  slotsPerTransaction?: number;
}

/** Builds a vault client (the family that runs the vault's chain supplies it). */
export type ConfidentialVaultFactory = (
  opts: ConfidentialVaultOptions,
) => Promise<ConfidentialVault>;
