/**
 * Decides, from the chain alone, what became of a settlement whose process
 * stopped before recording the outcome. Never sends anything new: at most it
 * re-sends the exact transaction that was signed and journaled for it, which
 * has the same hash and nonce and so cannot move money twice.
 */
import { BaseError, parseAbi, type Hex, type PublicClient, type TransactionReceipt } from "viem";
import { Reason } from "../../lib/reasons.js";

export interface JournaledTransaction {
  hash: Hex;
  raw: Hex;
}

export type ReconcileOutcome =
  | { status: "succeeded"; transaction: Hex }
  | { status: "failed"; reason: string; message: string; transaction?: Hex }
  | { status: "pending"; transaction?: Hex };

const EIP3009_ABI = parseAbi([
  "function authorizationState(address authorizer, bytes32 nonce) view returns (bool)",
]);

interface Eip3009Authorization {
  from: Hex;
  validBefore: string;
  nonce: Hex;
}

function authorizationOf(request: unknown): { asset: Hex; auth: Eip3009Authorization } | undefined {
  const r = request as {
    paymentPayload?: { payload?: { authorization?: Eip3009Authorization } };
    paymentRequirements?: { asset?: Hex };
  };
  const auth = r.paymentPayload?.payload?.authorization;
  const asset = r.paymentRequirements?.asset;
  return auth && asset ? { asset, auth } : undefined;
}

async function findReceipt(client: PublicClient, txs: readonly JournaledTransaction[]) {
  for (const tx of txs) {
    const r = await client.getTransactionReceipt({ hash: tx.hash }).catch(() => undefined);
    if (r) return r;
  }
  return undefined;
}

/** What the receipt of one of our transactions says of the settlement. */
function outcomeOfReceipt(mined: TransactionReceipt): ReconcileOutcome {
  return mined.status === "success"
    ? { status: "succeeded", transaction: mined.transactionHash }
    : {
        status: "failed",
        reason: "invalid_exact_evm_transaction_failed",
        message: "the settlement transaction reverted",
        transaction: mined.transactionHash,
      };
}

export async function reconcileEvmSettlement(
  client: PublicClient,
  request: unknown,
  transactions: readonly JournaledTransaction[],
): Promise<ReconcileOutcome> {
  const mined = await findReceipt(client, transactions);
  if (mined) return outcomeOfReceipt(mined);

  const found = authorizationOf(request);
  const now = BigInt(Math.floor(Date.now() / 1000));
  if (found) {
    const used = await client.readContract({
      address: found.asset,
      abi: EIP3009_ABI,
      functionName: "authorizationState",
      args: [found.auth.from, found.auth.nonce],
    });
    if (used) {
      // Used, and no receipt when we looked: either ours was mined in the
      // moment between the two reads, or another transaction consumed the
      // authorization. A second look tells which; only then is it a failure,
      // with nothing of ours moved.
      const late = await findReceipt(client, transactions);
      if (late) return outcomeOfReceipt(late);
      return {
        status: "failed",
        reason: Reason.settlementInterrupted,
        message: "the authorization was used by another transaction",
      };
    }
    if (BigInt(found.auth.validBefore) <= now) {
      return {
        status: "failed",
        reason: Reason.settlementInterrupted,
        message:
          "the settlement was interrupted and the authorization has expired; nothing was transferred",
      };
    }
  }

  const latest = transactions[transactions.length - 1];
  if (!latest) {
    // The journal is written before any broadcast: no entry, no broadcast.
    return {
      status: "failed",
      reason: Reason.settlementInterrupted,
      message: "the settlement was interrupted before anything was sent; nothing was transferred",
    };
  }
  try {
    await client.sendRawTransaction({ serializedTransaction: latest.raw });
  } catch (e) {
    const text = e instanceof BaseError ? `${e.shortMessage} ${e.details}` : String(e);
    if (/already known|already imported|known transaction/i.test(text))
      return { status: "pending", transaction: latest.hash };
    // Nonce used by something else: ours can no longer be mined, unless it
    // was mined just now.
    const late = await findReceipt(client, transactions);
    if (late) return reconcileEvmSettlement(client, request, transactions);
    if (/nonce too low|nonce.*already/i.test(text)) {
      return {
        status: "failed",
        reason: Reason.settlementInterrupted,
        message:
          "the settlement was interrupted and its transaction was superseded; nothing was transferred",
      };
    }
    throw e;
  }
  return { status: "pending", transaction: latest.hash };
}
