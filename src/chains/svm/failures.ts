/**
 * What a Solana settlement transaction that fails costs us, and who caused
 * the failure.
 *
 * The fee: Solana charges the fee payer (ours) a transaction's fee whether
 * it succeeds or fails once it is executed: 5,000 lamports per signature,
 * plus its priority fee, the compute-unit limit times the compute-unit price
 * (micro-lamports) rounded up. Both are in the message, so the fee is known
 * before the transaction leaves: it is its worst cost for the failed-fee
 * budget, and what a failure cost.
 *
 * The cause: a payment's transaction moves the payer's tokens with one
 * `TransferChecked` from its token account. When it fails on-chain, the
 * payer caused it if that account is gone (closed), or holds less than the
 * amount (the payer moved its funds away after our simulation), or is not
 * the payer's any more; otherwise the requirements did (a mint frozen by
 * its authority, a payTo account closed, say).
 */
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import {
  getBase58Decoder,
  getBase64Encoder,
  getCompiledTransactionMessageDecoder,
  getTransactionDecoder,
  type Address,
  type ReadonlyUint8Array,
} from "@solana/kit";
import { TOKEN_PROGRAM_ADDRESS } from "@solana-program/token";
import type { FailureCause } from "../ports.js";

const COMPUTE_BUDGET_PROGRAM = "ComputeBudget111111111111111111111111111111";
const TOKEN_2022_PROGRAM = "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb";
const LAMPORTS_PER_SIGNATURE = 5_000n;
/** Compute units an instruction gets when the transaction sets no limit. */
const DEFAULT_UNITS_PER_INSTRUCTION = 200_000n;
const MAX_UNITS = 1_400_000n;
/** The SPL Token instruction a payment's transfer is. */
const TRANSFER_CHECKED = 12;

function littleEndian(data: ReadonlyUint8Array, from: number, bytes: number): bigint {
  let n = 0n;
  for (let i = bytes - 1; i >= 0; i--) n = (n << 8n) | BigInt(data[from + i] ?? 0);
  return n;
}

interface Compiled {
  header: { numSignerAccounts: number };
  staticAccounts: readonly Address[];
  instructions: readonly {
    programAddressIndex: number;
    accountIndices?: readonly number[];
    data?: ReadonlyUint8Array;
  }[];
}

/** The message's accounts and instructions (legacy and v0 messages: the ones payments use). */
function compiled(messageBytes: ReadonlyUint8Array): Compiled {
  const message = getCompiledTransactionMessageDecoder().decode(messageBytes);
  return {
    header: message.header,
    staticAccounts: message.staticAccounts,
    instructions: "instructions" in message ? message.instructions : [],
  };
}

/** The fee (lamports) a transaction's fee payer is charged once it is executed. */
export function transactionFee(messageBytes: ReadonlyUint8Array): bigint {
  const message = compiled(messageBytes);
  const accounts = message.staticAccounts;
  let limit: bigint | undefined;
  let price = 0n;
  let others = 0n;
  for (const ix of message.instructions) {
    const data = ix.data;
    if (accounts[ix.programAddressIndex] !== COMPUTE_BUDGET_PROGRAM || !data) {
      others++;
      continue;
    }
    if (data[0] === 2) limit = littleEndian(data, 1, 4);
    else if (data[0] === 3) price = littleEndian(data, 1, 8);
  }
  const units = limit ?? minimum(others * DEFAULT_UNITS_PER_INSTRUCTION, MAX_UNITS);
  const priority = (units * price + 999_999n) / 1_000_000n;
  return BigInt(message.header.numSignerAccounts) * LAMPORTS_PER_SIGNATURE + priority;
}

function minimum(a: bigint, b: bigint): bigint {
  return a < b ? a : b;
}

/** The payment's transfer: the payer's token account it moves from, and the amount. */
function paymentTransfer(
  payload: PaymentPayload,
): { source: Address; owner: Address; amount: bigint } | undefined {
  const wire = (payload.payload as Record<string, unknown> | undefined)?.["transaction"];
  if (typeof wire !== "string") return undefined;
  try {
    const tx = getTransactionDecoder().decode(getBase64Encoder().encode(wire));
    const message = compiled(tx.messageBytes);
    const accounts = message.staticAccounts;
    for (const ix of message.instructions) {
      const program = accounts[ix.programAddressIndex];
      if (program !== TOKEN_PROGRAM_ADDRESS && program !== TOKEN_2022_PROGRAM) continue;
      if (ix.data?.[0] !== TRANSFER_CHECKED || !ix.accountIndices) continue;
      const [source, , , owner] = ix.accountIndices.map((i) => accounts[i]);
      if (!source || !owner) return undefined;
      return { source, owner, amount: littleEndian(ix.data, 1, 8) };
    }
  } catch {
    return undefined;
  }
  return undefined;
}

/** Reads a token account: its owner and amount (undefined: it does not exist). */
export type TokenAccountReader = (
  account: Address,
) => Promise<{ owner: string; amount: bigint } | undefined>;

export async function svmFailureCause(
  payload: PaymentPayload,
  requirements: PaymentRequirements,
  read: TokenAccountReader,
): Promise<FailureCause> {
  const transfer = paymentTransfer(payload);
  if (!transfer) return "requirements";
  const account = await read(transfer.source);
  if (!account) return "payer";
  if (account.owner !== transfer.owner) return "payer";
  const needed = transfer.amount > 0n ? transfer.amount : BigInt(requirements.amount);
  return account.amount < needed ? "payer" : "requirements";
}

/** A token account's owner (bytes 32..64) and amount (bytes 64..72) from its data. */
export function tokenAccountFields(data: Uint8Array): { owner: string; amount: bigint } {
  return {
    owner: getBase58Decoder().decode(data.subarray(32, 64)),
    amount: littleEndian(data, 64, 8),
  };
}
