/**
 * The chain's positive word that a settlement's transactions are gone: what
 * the reorg watch needs before it records a success failed. A read that
 * failed (an RPC error, a timeout) says nothing, and neither does a node
 * that lags behind: a transaction is off the chain only when the node
 * answers that it has no receipt for it and, for the payment's own
 * transaction, that its sender's nonce was taken by another mined
 * transaction (or, when its signed bytes are no longer kept, that the node
 * does not know it at all). A lagging node has not counted our nonce yet,
 * so it never gives that answer.
 */
import {
  parseTransaction,
  recoverTransactionAddress,
  TransactionNotFoundError,
  TransactionReceiptNotFoundError,
  type Hex,
  type PublicClient,
  type TransactionReceipt,
} from "viem";
import type { JournalEntry } from "../../ports.js";

/** The chain has not (yet) shown what is asked: no verdict, ask again later. */
class NoVerdictError extends Error {
  override name = "NoVerdictError";
}

/** The receipt of `hash`, or undefined when the node answers it has none; a failed read throws. */
export async function receiptOrNone(
  client: PublicClient,
  hash: Hex,
): Promise<TransactionReceipt | undefined> {
  try {
    return await client.getTransactionReceipt({ hash });
  } catch (e) {
    if (e instanceof TransactionReceiptNotFoundError) return undefined;
    throw e;
  }
}

/**
 * Resolves when the chain shows that none of `transactions` is mined and
 * the last of them (the payment's own call) can no longer be mined; throws
 * otherwise (`NoVerdictError`, or the read that failed).
 */
export async function assertOffTheChain(
  client: PublicClient,
  transactions: readonly JournalEntry[],
): Promise<void> {
  const own = transactions.at(-1);
  if (!own) throw new NoVerdictError("no transaction was journaled for it to judge by");
  for (const t of transactions) {
    if (await receiptOrNone(client, t.reference as Hex)) {
      throw new NoVerdictError(`its transaction ${t.reference} is mined`);
    }
  }
  const raw = own.detail["raw"];
  if (typeof raw === "string" && raw.length > 2) {
    const { nonce } = parseTransaction(raw as Hex);
    const from = (own.signer ??
      (await recoverTransactionAddress({ serializedTransaction: raw as never }))) as Hex;
    const taken = await client.getTransactionCount({ address: from, blockTag: "latest" });
    if (nonce === undefined || taken <= nonce) {
      throw new NoVerdictError(`its transaction ${own.reference} can still be mined at its nonce`);
    }
    // Counted, and still no receipt of ours: another transaction took the nonce.
    if (await receiptOrNone(client, own.reference as Hex)) {
      throw new NoVerdictError(`its transaction ${own.reference} is mined`);
    }
    return;
  }
  try {
    await client.getTransaction({ hash: own.reference as Hex });
  } catch (e) {
    if (e instanceof TransactionNotFoundError) return;
    throw e;
  }
  throw new NoVerdictError(`the node still holds its transaction ${own.reference}`);
}
