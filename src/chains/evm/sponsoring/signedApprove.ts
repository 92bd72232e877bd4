/**
 * A payer's signed approve as this service reads it, offline: the
 * transaction decoded, its signer recovered, its spender and amount read
 * from the calldata, or the reason it is not an approve we can relay.
 */
import {
  decodeFunctionData,
  erc20Abi,
  getAddress,
  keccak256,
  parseTransaction,
  recoverTransactionAddress,
  type Hex,
  type TransactionSerializable,
} from "viem";
import { ApprovalReason } from "../reasons.js";

/** A signed approve, decoded and with its signer recovered. */
export interface SignedApprove {
  raw: Hex;
  tx: TransactionSerializable;
  hash: Hex;
  signer: Hex;
  token: Hex;
  spender: Hex;
  amount: bigint;
  gas: bigint;
  /** maxFeePerGas, or gasPrice for the older types. */
  maxFee: bigint;
  /** maxPriorityFeePerGas; undefined for the older types (all above the base fee is tip). */
  tip: bigint | undefined;
}

/** Decodes a signed approve offline, or says what is wrong with it. */
export async function readApprove(
  raw: Hex,
): Promise<{ ok: true; approve: SignedApprove } | { ok: false; reason: string; message: string }> {
  let tx: TransactionSerializable;
  try {
    tx = parseTransaction(raw);
  } catch {
    return {
      ok: false,
      reason: ApprovalReason.parse,
      message: "signedTransaction is not a serialized signed transaction",
    };
  }
  if (tx.type !== "eip1559" && tx.type !== "eip2930" && tx.type !== "legacy") {
    return {
      ok: false,
      reason: ApprovalReason.type,
      message: `the approve is a ${String(tx.type)} transaction; only legacy, EIP-2930 and EIP-1559 transactions are relayed`,
    };
  }
  if (!tx.to) {
    return { ok: false, reason: ApprovalReason.target, message: "the approve creates a contract" };
  }
  const data = tx.data ?? "0x";
  if (!data.toLowerCase().startsWith("0x095ea7b3")) {
    return {
      ok: false,
      reason: ApprovalReason.selector,
      message: "the signed transaction does not call approve(address,uint256)",
    };
  }
  let spender: Hex;
  let amount: bigint;
  try {
    const decoded = decodeFunctionData({ abi: erc20Abi, data });
    if (decoded.functionName !== "approve") throw new Error("not approve");
    [spender, amount] = decoded.args as readonly [Hex, bigint];
  } catch {
    return {
      ok: false,
      reason: ApprovalReason.calldata,
      message: "the approve's calldata does not decode as approve(address,uint256)",
    };
  }
  let signer: Hex;
  try {
    signer = await recoverTransactionAddress({ serializedTransaction: raw as never });
  } catch {
    return {
      ok: false,
      reason: ApprovalReason.signer,
      message: "no signer can be recovered from the signed transaction",
    };
  }
  const maxFee = tx.type === "eip1559" ? tx.maxFeePerGas : tx.gasPrice;
  return {
    ok: true,
    approve: {
      raw,
      tx,
      hash: keccak256(raw),
      signer: getAddress(signer),
      token: getAddress(tx.to),
      spender: getAddress(spender),
      amount,
      gas: tx.gas ?? 0n,
      maxFee: maxFee ?? 0n,
      // A zero tip is left out of the encoding, so read as absent.
      tip: tx.type === "eip1559" ? (tx.maxPriorityFeePerGas ?? 0n) : undefined,
    },
  };
}
