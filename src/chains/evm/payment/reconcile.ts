/**
 * Decides, from the chain alone, what became of a settlement whose process
 * stopped before recording the outcome. Never sends anything new: at most it
 * re-sends the exact transaction that was signed and journaled for it, which
 * has the same hash and nonce and so cannot move money twice.
 *
 * A settlement succeeded only when one of its transactions was mined with
 * the transfer the payment promised (promisedTransfer.ts: for `exact` the
 * token's `Transfer` from the payer to the recipient for the amount, as the
 * mechanism itself checks at settle; for `batch-settlement` the deposit into
 * the escrow, or the escrow's payout). A settlement sends more than its transfer at times (an ERC-6492
 * wallet's deployment first): a mined deployment is not a payment.
 */
import { BaseError, parseAbi, type Hex, type PublicClient, type TransactionReceipt } from "viem";
import { Reason } from "../../../protocol/reasons.js";
import { EvmReason } from "../reasons.js";
import { carriesTransfer, promisedTransferOf, type PromisedTransfer } from "./promisedTransfer.js";
import { receiptOrNone } from "./offTheChain.js";

export interface JournaledTransaction {
  hash: Hex;
  raw: Hex;
}

export type ReconcileOutcome =
  | { status: "succeeded"; transaction: Hex }
  | { status: "failed"; reason: string; message: string; transaction?: Hex }
  | { status: "pending"; transaction?: Hex };

export const EIP3009_ABI = parseAbi([
  "function authorizationState(address authorizer, bytes32 nonce) view returns (bool)",
  "event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)",
]);

interface Eip3009Authorization {
  from: Hex;
  validBefore: string;
  nonce: Hex;
}

/** The EIP-3009 authorization a settlement's stored request carries, if it is one. */
export function authorizationOf(
  request: unknown,
): { asset: Hex; auth: Eip3009Authorization } | undefined {
  const r = request as {
    paymentPayload?: { payload?: { authorization?: Eip3009Authorization } };
    paymentRequirements?: { asset?: Hex };
  };
  const auth = r.paymentPayload?.payload?.authorization;
  const asset = r.paymentRequirements?.asset;
  return auth && asset ? { asset, auth } : undefined;
}

/**
 * Each transaction's receipt, undefined where the node answers it has none.
 * A read that fails is not an absence: it throws, and the outcome is asked
 * again later (taken as absent, a mined payment could be judged superseded).
 */
function receiptsOf(
  client: PublicClient,
  txs: readonly JournaledTransaction[],
): Promise<(TransactionReceipt | undefined)[]> {
  return Promise.all(txs.map((tx) => receiptOrNone(client, tx.hash)));
}

/**
 * What the mined transactions say of the settlement, or undefined while the
 * payment's own transaction is not among them.
 */
function outcomeOfReceipts(
  receipts: readonly (TransactionReceipt | undefined)[],
  expected: PromisedTransfer | undefined,
): ReconcileOutcome | undefined {
  const mined = receipts.filter((r): r is TransactionReceipt => r !== undefined);
  const paid = mined.find(
    (r) => r.status === "success" && (!expected || carriesTransfer(r, expected)),
  );
  if (paid) return { status: "succeeded", transaction: paid.transactionHash };
  const reverted = mined.find((r) => r.status === "reverted");
  if (reverted) {
    return {
      status: "failed",
      reason: EvmReason.transactionFailed,
      message: "the settlement transaction reverted",
      transaction: reverted.transactionHash,
    };
  }
  return undefined;
}

export async function reconcileEvmSettlement(
  client: PublicClient,
  request: unknown,
  transactions: readonly JournaledTransaction[],
): Promise<ReconcileOutcome> {
  const expected = promisedTransferOf(request);
  const receipts = await receiptsOf(client, transactions);
  const decided = outcomeOfReceipts(receipts, expected);
  if (decided) return decided;

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
      const late = outcomeOfReceipts(await receiptsOf(client, transactions), expected);
      if (late) return late;
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

  if (transactions.length === 0) {
    // The journal is written before any broadcast: no entry, no broadcast.
    return {
      status: "failed",
      reason: Reason.settlementInterrupted,
      message: "the settlement was interrupted before anything was sent; nothing was transferred",
    };
  }
  const unmined = transactions.filter((_, i) => receipts[i] === undefined);
  const latest = unmined[unmined.length - 1];
  if (!latest) {
    // Everything it sent was mined and none of it was the payment (a wallet
    // deployment whose transfer never followed): the payment was not made.
    return {
      status: "failed",
      reason: Reason.settlementInterrupted,
      message:
        "the settlement was interrupted after its preparatory transaction and before the transfer; nothing was transferred",
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
    const late = await receiptOrNone(client, latest.hash);
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
