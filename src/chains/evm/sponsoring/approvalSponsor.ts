/**
 * `erc20ApprovalGasSponsoring` on one EVM network. A payer whose token has
 * no EIP-2612 permit (USDG, any plain ERC-20), who never approved Permit2
 * and may hold no gas at all, signs an ordinary `approve(Permit2, amount)`
 * transaction and puts it next to its Permit2 authorization. At settle this
 * service funds the payer's gas when it lacks it, broadcasts the payer's
 * approve, and then sends the Permit2 proxy's `settle`.
 *
 * The official `@x402/evm` mechanisms drive the flow: they check the
 * approve's target, selector, spender and signer, then call this network's
 * extension signer (`simulateTransactions` at verify, `sendTransactions` at
 * settle). What they leave open is what makes the approve safe for us to
 * pay for and to send, checked at /verify and again at /settle before
 * anything leaves (`check`, from the family's `prepare`; the offline rules
 * are approveRules.ts, those that read the chain approveFunding.ts):
 * - it is for this chain (EIP-155 chain id; a legacy transaction without one
 *   could be replayed anywhere), an ordinary type (no blobs, no EIP-7702
 *   delegation), sends no native value;
 * - it approves at least the payment (the Permit2 authorization's amount,
 *   the maximum for `upto`), and the extension's `amount` says the same;
 * - its gas limit is within EVM_MAX_GAS_PER_TX and its maximum fee within
 *   what we would offer for a transaction of our own now (so the gas we
 *   fund is bounded and not a gift), and not below the base fee (it would
 *   never be mined);
 * - its nonce is the payer's next one (a stale approve can never be mined).
 *
 * Invariants:
 * - Nothing is sent that the payment does not need: no approve when
 *   Permit2's allowance already covers the payment (an earlier payment's
 *   approve, or this one's after a retry), no funding when the payer's
 *   balance covers the approve's gas.
 * - An approve leaves only from a settle whose payment the mechanism just
 *   verified, never from /verify, and at most once: one payment settles
 *   once (the duplicate rules), a mined approve is never sent again, and its
 *   nonce makes a second one impossible anyway.
 * - Funding, approve and settlement are each journaled on the settlement
 *   before they leave, in that order, so the settlement records all three.
 *
 * The extension's text asks for one atomic bundle (funding, approve,
 * settle) so no one can take the funded gas in between. Public EVM nodes
 * offer no such bundle; the exposure is bounded instead: the funding is
 * only the deficit for this one approve's gas at a fee we accept, and it is
 * sent right before the approve that spends it.
 */
import type { TransactionRequest, Erc20ApprovalGasSponsoringSigner } from "@x402/extensions";
import type { FacilitatorEvmSigner } from "@x402/evm";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { erc20Abi, type Hex, type PublicClient, type TransactionReceipt } from "viem";
import type { SponsoredFundings, TransactionJournal } from "../../ports.js";
import { currentSettlement } from "../../settlementScope.js";
import { isAlreadyKnown, isNonceError, isTransportError } from "../signer/broadcastErrors.js";
import type { FeeOracle } from "../rpc/feeOracle.js";
import { refusingClearly } from "../signer/signer.js";
import type { EvmSignerPool } from "../signer/signerPool.js";
import { ApprovalReason } from "../reasons.js";
import { ApproveFunding, fundingRefused } from "./approveFunding.js";
import { checkApproveOffline, ERC20_APPROVAL_KEY, type ApprovalCheck } from "./approveRules.js";
import { readApprove, type SignedApprove } from "./signedApprove.js";
import { NOT_A_SETTLEMENT, PERMIT2, settlementOf } from "./sponsoredSettlement.js";

const OK: ApprovalCheck = { ok: true };

/** A plain transfer of native value runs no code and costs exactly this. */
const PLAIN_TRANSFER_GAS = 21_000n;

/** What the extension signer offers beyond the official interface: a pre-send simulation. */
export interface SponsoringSigner extends Erc20ApprovalGasSponsoringSigner {
  simulateTransactions(transactions: TransactionRequest[]): Promise<boolean>;
}

export interface ApprovalSponsorOptions {
  network: string;
  chainId: number;
  client: PublicClient;
  pool: EvmSignerPool;
  /** The network's signer for the mechanisms (reads, receipts). */
  signer: FacilitatorEvmSigner;
  fees: FeeOracle;
  journal: TransactionJournal;
  /** Who was funded already, and each account's budget. */
  fundings: SponsoredFundings;
  /** An OP-stack chain: the approve's L1 data fee is funded too (GasPriceOracle). */
  opStack: boolean;
  /** EVM_MAX_GAS_PER_TX: the approve's gas limit may not exceed it. */
  maxGasPerTransaction?: bigint;
  /** Bound on each receipt wait (funding, approve). */
  confirmationTimeoutMs: number;
}

/** Whether a node said it does not serve a method (rather than failing to answer). */
function unsupportedMethod(e: unknown): boolean {
  const text =
    e instanceof Error ? `${e.message} ${String((e as { details?: unknown }).details)}` : String(e);
  const code = (e as { code?: unknown }).code;
  return (
    code === -32601 || /method .*not (found|supported|available)|unsupported method/i.test(text)
  );
}

export class ApprovalSponsor {
  /** The extension signer the mechanisms call on this network. */
  readonly signer: SponsoringSigner;
  /** The relay running for each payer: one at a time, so a second waits and finds the allowance. */
  private readonly relaying = new Map<string, Promise<unknown>>();
  /** The checks that read the chain, and the funding an approve needs. */
  private readonly funding: ApproveFunding;

  constructor(private readonly opts: ApprovalSponsorOptions) {
    this.funding = new ApproveFunding(opts);
    const base = opts.signer;
    this.signer = {
      getAddresses: () => base.getAddresses(),
      readContract: (args) => base.readContract(args as Parameters<typeof base.readContract>[0]),
      verifyTypedData: (args) =>
        base.verifyTypedData(args as Parameters<typeof base.verifyTypedData>[0]),
      writeContract: (args) => base.writeContract(args as Parameters<typeof base.writeContract>[0]),
      sendTransaction: (args) => base.sendTransaction(args),
      waitForTransactionReceipt: (args) => base.waitForTransactionReceipt(args),
      getCode: (args) => base.getCode(args),
      sendTransactions: (transactions) => this.sendTransactions(transactions),
      simulateTransactions: (transactions) => this.simulateTransactions(transactions),
    };
  }

  /**
   * Whether a payment's sponsored approve may be sent for it (see the file
   * comment); OK when the payment carries none. Reads the chain, sends
   * nothing. Throws only when the chain could not be read.
   */
  async check(payload: PaymentPayload, requirements: PaymentRequirements): Promise<ApprovalCheck> {
    const offline = await checkApproveOffline(
      payload,
      requirements,
      this.opts.chainId,
      this.opts.maxGasPerTransaction,
    );
    if (!offline.ok || offline.approve === undefined) return offline;
    const { approve: a, needed } = offline;
    // Permit2 may already hold enough (an earlier approve): this one is not sent.
    if ((await this.allowance(a.token, a.signer)) >= needed) return OK;
    return this.funding.fundable(a, needed);
  }

  /**
   * Settle: the approve (funded first when the payer lacks the gas), then
   * the settlement from our account. The mechanisms pass exactly the signed
   * approve and the proxy call.
   */
  async sendTransactions(transactions: TransactionRequest[]): Promise<Hex[]> {
    const [approve, settle, ...more] = transactions;
    if (typeof approve !== "string" || !settle || typeof settle === "string" || more.length) {
      throw new Error(
        `${ApprovalReason.failed}: expected one signed approve and then one settlement call`,
      );
    }
    const target = settlementOf(settle);
    if (!target) throw new Error(NOT_A_SETTLEMENT);
    const approveHash = await this.relay(approve, target.needed);
    // The mechanisms suggest a fixed gas limit; the pool's own simulation
    // instead proves the settlement succeeds now that Permit2 is approved,
    // before a nonce of ours is taken.
    const settleHash = await refusingClearly(() =>
      this.opts.pool.send({
        to: settle.to,
        data: settle.data,
        ...(target.sender ? { from: target.sender } : {}),
      }),
    );
    return approveHash ? [approveHash, settleHash] : [settleHash];
  }

  /**
   * Verify: whether the approve and then the settlement succeed, in one
   * `eth_simulateV1` block. A node without that method gets the next best:
   * the approve alone, and the payer's balance.
   */
  async simulateTransactions(transactions: TransactionRequest[]): Promise<boolean> {
    const [approve, settle] = transactions;
    if (typeof approve !== "string" || !settle || typeof settle === "string") return false;
    const read = await readApprove(approve);
    if (!read.ok) return false;
    const { signer: payer, token, tx } = read.approve;
    // A call this service does not sponsor simulates as a failure: the
    // payment is refused with the mechanism's reason, never an error.
    const target = settlementOf(settle);
    if (!target) return false;
    const settler = target.sender ?? this.opts.pool.addresses[0];
    const request = this.opts.client.request as unknown as (args: {
      method: string;
      params: unknown[];
    }) => Promise<unknown>;
    try {
      const blocks = (await request({
        method: "eth_simulateV1",
        params: [
          {
            blockStateCalls: [
              {
                calls: [
                  { from: payer, to: token, data: tx.data },
                  { from: settler, to: settle.to, data: settle.data },
                ],
              },
            ],
            validation: false,
          },
          "latest",
        ],
      })) as { calls?: { status?: string }[] }[];
      const calls = blocks[0]?.calls ?? [];
      return calls.length === 2 && calls.every((c) => c.status === "0x1");
    } catch (e) {
      if (!unsupportedMethod(e)) throw e;
    }
    const [approves, balance] = await Promise.all([
      this.opts.client
        .call({ account: payer, to: token, data: tx.data ?? "0x" })
        .then(() => true)
        .catch(() => false),
      this.opts.client.readContract({
        address: token,
        abi: erc20Abi,
        functionName: "balanceOf",
        args: [payer],
      }),
    ]);
    return approves && balance >= target.needed;
  }

  private allowance(token: Hex, owner: Hex): Promise<bigint> {
    return this.opts.client.readContract({
      address: token,
      abi: erc20Abi,
      functionName: "allowance",
      args: [owner, PERMIT2],
    });
  }

  /**
   * The payer's approve on the chain; undefined when Permit2 already holds
   * enough. Two payments of one cold payer settling at once each carry an
   * approve at the same nonce: the second waits for the first's relay, then
   * finds the allowance there and sends nothing (in this process; across
   * replicas its approve fails on the nonce and that payment is refused).
   */
  private async relay(raw: Hex, needed: bigint): Promise<Hex | undefined> {
    const read = await readApprove(raw);
    if (!read.ok) throw new Error(`${ApprovalReason.failed}: ${read.message}`);
    const a = read.approve;
    const key = a.signer.toLowerCase();
    const run = (this.relaying.get(key) ?? Promise.resolve())
      .catch(() => undefined)
      .then(() => this.relayNow(raw, a, needed));
    const tail = run.catch(() => undefined);
    this.relaying.set(key, tail);
    try {
      return await run;
    } finally {
      if (this.relaying.get(key) === tail) this.relaying.delete(key);
    }
  }

  private async relayNow(raw: Hex, a: SignedApprove, needed: bigint): Promise<Hex | undefined> {
    const { client } = this.opts;
    const [mined, allowance] = await Promise.all([
      client.getTransactionReceipt({ hash: a.hash }).catch(() => undefined),
      this.allowance(a.token, a.signer),
    ]);
    // Sent and mined by an earlier attempt of this payment: never again.
    if (mined) {
      if (mined.status !== "success") {
        throw new Error(`${ApprovalReason.failed}: the payer's approve ${a.hash} reverted`);
      }
      return a.hash;
    }
    if (allowance >= needed) return undefined;
    const scope = currentSettlement()?.notes;
    const refuse = (r: { reason: string; message: string }): never => {
      // The settle answers the precise reason, not the mechanism's generic one.
      if (scope && !scope.sent) scope.refusal = r;
      throw new Error(`${ApprovalReason.failed}: ${r.message}`);
    };
    const fundable = await this.funding.fundable(a, needed);
    if (!fundable.ok) return refuse(fundable);
    if (fundable.funding) {
      const reserved = await this.opts.fundings.reserve(
        this.opts.network,
        a.signer,
        fundable.funding,
      );
      if (reserved) return refuse(fundingRefused(reserved));
      await this.fund(a.signer, fundable.funding);
    }
    await this.opts.journal.sent({
      network: this.opts.network,
      reference: a.hash,
      // Not one of our accounts: the payer signed it, so no `signer`.
      detail: { raw, nonce: a.tx.nonce, payer: a.signer, sponsored: ERC20_APPROVAL_KEY },
    });
    if (scope) scope.sent = true;
    await this.broadcast(raw, a.hash);
    const receipt = await this.receipt(a.hash, "the payer's approve");
    await this.opts.journal.finished(a.hash, receipt.status, receipt.blockNumber);
    if (receipt.status !== "success") {
      throw new Error(`${ApprovalReason.failed}: the payer's approve ${a.hash} reverted`);
    }
    return a.hash;
  }

  /**
   * Sends the payer `value`, the approve's up-front gas beyond what it
   * holds, as a plain transfer: 21,000 gas, so no code of the payer's runs
   * on our gas (a payer with code is never funded; one that gained code
   * since costs us this transfer and gets nothing). A funding refused
   * before it left is forgotten, so the payer may be funded later.
   */
  private async fund(payer: Hex, value: bigint): Promise<void> {
    let hash: Hex;
    try {
      hash = await refusingClearly(() =>
        this.opts.pool.send({ to: payer, data: "0x", gas: PLAIN_TRANSFER_GAS, value }),
      );
    } catch (e) {
      if (!currentSettlement()?.notes.sent) {
        await this.opts.fundings.release(this.opts.network, payer).catch(() => undefined);
      }
      throw e;
    }
    const receipt = await this.receipt(hash, "the gas funding of the payer");
    if (receipt.status !== "success") {
      throw new Error(`${ApprovalReason.failed}: the gas funding ${hash} reverted`);
    }
  }

  /** Broadcasts the payer's bytes as they are; a lost answer is retried with the same bytes. */
  private async broadcast(raw: Hex, hash: Hex): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.opts.client.sendRawTransaction({ serializedTransaction: raw });
        return;
      } catch (e) {
        if (isAlreadyKnown(e)) return;
        if (isNonceError(e)) {
          const mined = await this.opts.client
            .getTransactionReceipt({ hash })
            .catch(() => undefined);
          if (mined) return;
          throw new Error(
            `${ApprovalReason.failed}: the payer's nonce moved on; this approve can no longer be mined`,
          );
        }
        if (isTransportError(e) && attempt < 3) {
          await new Promise((r) => setTimeout(r, 200 * attempt));
          continue;
        }
        const why = e instanceof Error ? e.message.split("\n")[0] : String(e);
        throw new Error(`${ApprovalReason.failed}: the node refused the approve (${why})`);
      }
    }
  }

  private async receipt(hash: Hex, what: string): Promise<TransactionReceipt> {
    try {
      return await this.opts.pool.waitForReceipt(hash, this.opts.confirmationTimeoutMs);
    } catch {
      throw new Error(
        `${ApprovalReason.failed}: ${what} (${hash}) was sent but not mined within ${this.opts.confirmationTimeoutMs} ms; the payment was not settled`,
      );
    }
  }
}
