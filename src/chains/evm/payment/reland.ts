/**
 * Lands a success again that a reorg took back when its journaled
 * transaction can no longer be mined (another transaction took its nonce).
 *
 * The payer's authorization is what moves the money, and the journal keeps
 * the transaction that carried it: its call (the token's
 * `transferWithAuthorization`, a Permit2 proxy's `settle`) is sent again,
 * from the same account (the upto proxy takes a settle only from the
 * facilitator the payer named), at a new nonce. The signer pool simulates
 * it first: a call that would revert (the authorization used or expired,
 * the funds gone) is not sent, and the payment can no longer land. Sending
 * it twice is harmless: an authorization can be spent by one transaction
 * only, whichever lands first. An authorization spent meanwhile by a
 * transaction not ours (anyone may submit it) paid the merchant all the
 * same: the payment then stands, in that transaction (spentElsewhere.ts).
 * It answers that the payment cannot land only on the chain's positive word
 * that none of its transactions is mined and the last can no longer be
 * (offTheChain.ts); a read that fails, or a node that lags, is no verdict:
 * the error is thrown and the watch asks again later.
 */
import {
  BaseError,
  parseTransaction,
  recoverTransactionAddress,
  type Hex,
  type PublicClient,
} from "viem";
import type { PendingSettlement, ReconcileOutcome } from "../../ports.js";
import { Reason } from "../../../protocol/reasons.js";
import { runInSettlementScope } from "../../settlementScope.js";
import { AmbiguousBroadcastError, isTransportError } from "../signer/broadcastErrors.js";
import type { EvmSignerPool } from "../signer/signerPool.js";
import { spentElsewhere } from "./spentElsewhere.js";
import { assertOffTheChain } from "./offTheChain.js";

export async function relandEvmSettlement(
  pool: EvmSignerPool,
  client: PublicClient,
  pending: PendingSettlement & { id: string },
): Promise<ReconcileOutcome> {
  // The payment's own call is the last one sent for it (a wallet's
  // deployment, when there is one, comes first; a fee bump carries the same call).
  const last = [...pending.transactions].reverse().find((t) => typeof t.detail["raw"] === "string");
  if (!last) {
    await assertOffTheChain(client, pending.transactions);
    return {
      status: "failed",
      reason: Reason.settlementInterrupted,
      message: "its signed transaction is no longer kept, so it cannot be sent again",
    };
  }
  const raw = last.detail["raw"] as Hex;
  const tx = parseTransaction(raw);
  if (!tx.to || !tx.data) {
    await assertOffTheChain(client, pending.transactions);
    return {
      status: "failed",
      reason: Reason.settlementInterrupted,
      message: "its journaled transaction carries no call to send again",
    };
  }
  const from = (last.signer ??
    (await recoverTransactionAddress({ serializedTransaction: raw as never }))) as Hex;
  try {
    const hash = await runInSettlementScope({ id: pending.id, notes: { sent: false } }, () =>
      pool.send({ to: tx.to!, data: tx.data!, from }),
    );
    return { status: "pending", transaction: hash };
  } catch (e) {
    // Sent, but the node's answer was lost: it may land; followed as any other.
    if (e instanceof AmbiguousBroadcastError) return { status: "pending", transaction: e.hash };
    const text = e instanceof BaseError ? `${e.shortMessage} ${e.details ?? ""}` : String(e);
    // Only a simulation that reverts is the chain's verdict; an RPC that
    // failed, or an account this replica cannot use now, is asked again.
    if (isTransportError(e) || !/revert/i.test(text)) throw e;
    const spender = await spentElsewhere(client, pending.request);
    if (spender) return { status: "succeeded", transaction: spender };
    await assertOffTheChain(client, pending.transactions);
    return {
      status: "failed",
      reason: Reason.settlementInterrupted,
      message: `the payment cannot land again: ${text.replace(/\s+/g, " ").trim().slice(0, 300)}`,
    };
  }
}
