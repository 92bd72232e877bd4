/**
 * Where a payer's authorization was spent, when a transaction that is not
 * ours spent it. Anyone may submit the payer's signed authorization: an
 * EIP-3009 `transferWithAuthorization` to the token, or a Permit2 permit to
 * the exact or upto proxy (permit2Spender.ts). The signature fixes the
 * recipient and the amount, so such a transaction pays the merchant what
 * the payment promised: a success a reorg took back whose authorization was
 * spent so, meanwhile, is still a success, in that transaction.
 */
import type { Hex, PublicClient } from "viem";
import { carriesTransfer, promisedTransferOf } from "./promisedTransfer.js";
import { EIP3009_ABI, authorizationOf } from "./reconcile.js";
import { permit2Spender, permitOf } from "./permit2Spender.js";

/**
 * How far back the spender is searched (the token's `AuthorizationUsed`
 * events, or its `Transfer`s to the recipient): far deeper than the success
 * watch (60 s), and short enough for providers that refuse long log ranges.
 */
const SEARCH_BLOCKS = 2_000n;

/**
 * The transaction that spent the request's authorization and carries the
 * transfer it promised, if it is on the chain; undefined when the
 * authorization is unspent, is of another kind, or its spender cannot be
 * found.
 */
export async function spentElsewhere(
  client: PublicClient,
  request: unknown,
): Promise<Hex | undefined> {
  const expected = promisedTransferOf(request);
  if (!expected) return undefined;
  const permit = permitOf(request);
  if (permit) return permit2Spender(client, permit, expected, SEARCH_BLOCKS);
  const found = authorizationOf(request);
  if (!found) return undefined;
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
