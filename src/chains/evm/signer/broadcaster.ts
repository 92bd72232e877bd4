/**
 * Signs, journals and broadcasts one transaction at a given nonce.
 *
 * Invariant: the signed bytes are journaled before they leave, so after a
 * crash the very same transaction (same hash, same nonce) can be found on
 * the chain or re-sent; a lost answer is retried with those same bytes, and
 * one that stays lost is reported as ambiguous, never as a failure.
 */
import { keccak256, TransactionNotFoundError, type Chain, type Hex, type PublicClient } from "viem";
import type { Logger } from "../../../lib/logger.js";
import type { TransactionJournal } from "../../ports.js";
import type { Fees } from "../rpc/feeOracle.js";
import type { Lane, NonceLanes } from "./nonceLanes.js";
import {
  AmbiguousBroadcastError,
  isAlreadyKnown,
  isNonceError,
  isTransportError,
} from "./broadcastErrors.js";
import { currentSettlement } from "../../settlementScope.js";

export interface TransactionCall {
  to: Hex;
  data: Hex;
  gas: bigint;
  /** Native value sent along (wei); absent: none. Only gas funding sends any. */
  value?: bigint;
}

export class Broadcaster {
  constructor(
    private readonly network: string,
    private readonly chain: Chain,
    private readonly client: PublicClient,
    private readonly journal: TransactionJournal,
    private readonly lanes: NonceLanes,
    private readonly log: Logger,
  ) {}

  async send(
    lane: Lane,
    nonce: number,
    call: TransactionCall,
    fees: Fees,
    replaces?: Hex,
  ): Promise<Hex> {
    const raw = lane.sign({
      chainId: this.chain.id,
      type: "eip1559",
      to: call.to,
      data: call.data,
      gas: call.gas,
      ...(call.value ? { value: call.value } : {}),
      nonce,
      maxFeePerGas: fees.maxFeePerGas,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    });
    const hash = keccak256(raw);
    await this.journal.sent({
      network: this.network,
      reference: hash,
      signer: lane.account.address,
      ...(replaces ? { replaces } : {}),
      // What it costs us at most if it reverts: every replica's failed-fee
      // budget counts it while it is in flight.
      worstFee: call.gas * fees.maxFeePerGas,
      detail: { nonce, raw },
    });
    const scope = currentSettlement()?.notes;
    if (scope) scope.sent = true;
    // Re-sending the same signed bytes is harmless (same hash, same nonce), so
    // a lost answer is retried; "already known" means the node has it.
    for (let attempt = 1; ; attempt++) {
      try {
        await this.client.sendRawTransaction({ serializedTransaction: raw });
        return hash;
      } catch (e) {
        if (isAlreadyKnown(e)) return hash;
        // A re-send after a lost answer can find the first one already
        // mined: the node then says "nonce too low". Whether it was ours is
        // read from the chain, never guessed: answering failed for a payment
        // that landed would be a lie.
        if (attempt > 1 && isNonceError(e) && (await this.nodeHas(hash, e))) return hash;
        if (!isTransportError(e)) throw e;
        if (attempt >= 3) throw new AmbiguousBroadcastError(hash, e);
        await new Promise((r) => setTimeout(r, 200 * attempt));
      }
    }
  }

  /** Whether the node has the transaction; a failed lookup keeps it ambiguous. */
  private async nodeHas(hash: Hex, sendError: unknown): Promise<boolean> {
    try {
      await this.client.getTransaction({ hash });
      return true;
    } catch (e) {
      if (e instanceof TransactionNotFoundError) return false;
      throw new AmbiguousBroadcastError(hash, sendError);
    }
  }

  /**
   * A nonce was taken but nothing was accepted at it: a no-op self-transfer
   * there keeps the account's later transactions from waiting behind a gap.
   */
  async fillGap(lane: Lane, nonce: number, fees: Fees): Promise<void> {
    try {
      await this.send(lane, nonce, { to: lane.account.address, data: "0x", gas: 21_000n }, fees);
    } catch (e) {
      // The nonce may have been accepted after all, or the node is down;
      // a resync on the next nonce error repairs the lane either way.
      this.lanes.forget(lane);
      this.log.warn(
        { err: String(e), signer: lane.account.address, nonce },
        "could not fill nonce gap",
      );
    }
  }
}
