/**
 * What confidential settlement needs from the privacy contract on its chain.
 * The chain side (`src/chains/evm/confidential/`) implements it; this feature
 * only schedules, records and answers. Every write here is safe to repeat:
 * the contract refuses a second slot for a merchant, a second credit of a
 * slot for a day and a second finalization, which is what makes the daily
 * batch and withdrawals exactly-once across retries, replicas and crashes.
 */
import type { Address, Hex, TypedDataDefinition } from "viem";

export interface ReceiptFields {
  /** The payment's EIP-3009 nonce: the receipt's identity on-chain. */
  paymentNonce: Hex;
  payer: Address;
  merchant: Address;
  slot: bigint;
  amount: bigint;
}

export interface SignedReceipt {
  /** The fields as signed, JSON-safe (big numbers as decimal strings). */
  receipt: Record<string, string>;
  signature: Hex;
}

export interface DayCredit {
  slot: bigint;
  /** May be zero: every enabled slot is written every day. */
  amount: bigint;
  receiptNonces: Hex[];
}

export interface WithdrawRequestInput {
  slot: bigint;
  merchant: Address;
  amount: bigint;
}

export interface WithdrawalOnChain {
  state: "debited" | "finalized" | "cancelled" | "unknown";
  paidAmount?: bigint;
}

export interface ConfidentialVault {
  readonly network: string;
  readonly address: Address;
  readonly asset: Address;
  /** The message a merchant's wallet signs to prove it holds the key. */
  enablementMessage(merchant: Address, accountRef: string): string;
  /** Assigns the merchant's slot on-chain; repeating it for the same merchant returns the same slot. */
  assignSlot(input: {
    merchant: Address;
    walletSignature: Hex;
  }): Promise<{ slot: bigint; txHash: Hex; secret?: Hex | undefined }>;
  signReceipt(fields: ReceiptFields): Promise<SignedReceipt>;
  /** Credits one UTC day; slots already credited for that day are skipped and reported. */
  creditDay(input: {
    day: number;
    credits: DayCredit[];
  }): Promise<{ txHashes: Hex[]; alreadyCredited: bigint[] }>;
  withdrawTypedData(input: WithdrawRequestInput): Promise<TypedDataDefinition>;
  submitWithdraw(input: {
    request: Record<string, unknown>;
    signature: Hex;
  }): Promise<{ withdrawalId: bigint; txHash: Hex }>;
  finalizeWithdraw(withdrawalId: bigint): Promise<{ txHash: Hex; paid: boolean; amount: bigint }>;
  withdrawal(withdrawalId: bigint): Promise<WithdrawalOnChain>;
  close(): Promise<void>;
}
