/**
 * Where a payer's EIP-3009 authorization was spent, when a transaction that
 * is not ours spent it. Anyone may submit `transferWithAuthorization` with
 * the payer's signature, and the signature fixes the recipient and the
 * amount, so such a transaction pays the merchant exactly what the payment
 * promised: a success a reorg took back whose authorization was spent so,
 * meanwhile, is still a success, in that transaction.
 */
import type { Hex, PublicClient } from "viem";
import { carriesTransfer, promisedTransferOf } from "./promisedTransfer.js";
import { EIP3009_ABI, authorizationOf } from "./reconcile.js";

/**
 * How far back the token's `AuthorizationUsed` events are searched: far
 * deeper than the success watch (60 s), and short enough for providers that
 * refuse long log ranges.
 */
const SEARCH_BLOCKS = 2_000n;

/**
 * The transaction that spent the request's authorization and carries the
 * transfer it promised, if it is on the chain; undefined when the
 * authorization is unspent, is not EIP-3009, or its spender cannot be found.
 */
export async function spentElsewhere(
  client: PublicClient,
  request: unknown,
): Promise<Hex | undefined> {
  const found = authorizationOf(request);
  const expected = promisedTransferOf(request);
  if (!found || !expected) return undefined;
  const { asset, auth } = found;
  const used = await client.readContract({
    address: asset,
    abi: EIP3009_ABI,
    functionName: "authorizationState",
    args: [auth.from, auth.nonce],
  });
  if (!used) return undefined;
  const latest = await client.getBlockNumber();
  const logs = await client.getContractEvents({
    address: asset,
    abi: EIP3009_ABI,
    eventName: "AuthorizationUsed",
    args: { authorizer: auth.from, nonce: auth.nonce },
    fromBlock: latest > SEARCH_BLOCKS ? latest - SEARCH_BLOCKS : 0n,
    toBlock: latest,
  });
  for (const log of logs.reverse()) {
    if (!log.transactionHash) continue;
    const receipt = await client.getTransactionReceipt({ hash: log.transactionHash });
    if (receipt.status === "success" && carriesTransfer(receipt, expected)) {
      return receipt.transactionHash;
    }
  }
  return undefined;
}
