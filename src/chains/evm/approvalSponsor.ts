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
 * pay for and to send, checked here at /verify and again at /settle before
 * anything leaves (`check`, from the family's `prepare`):
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
import {
  extractErc20ApprovalGasSponsoringInfo,
  validateErc20ApprovalGasSponsoringInfo,
  type Erc20ApprovalGasSponsoringSigner,
  type TransactionRequest,
  ERC20_APPROVAL_GAS_SPONSORING,
} from "@x402/extensions";
import {
  PERMIT2_ADDRESS,
  x402ExactPermit2ProxyABI,
  x402ExactPermit2ProxyAddress,
  x402UptoPermit2ProxyABI,
  x402UptoPermit2ProxyAddress,
  type FacilitatorEvmSigner,
} from "@x402/evm";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import {
  decodeFunctionData,
  erc20Abi,
  getAddress,
  isAddress,
  keccak256,
  parseTransaction,
  recoverTransactionAddress,
  type Hex,
  type PublicClient,
  type TransactionReceipt,
  type TransactionSerializable,
} from "viem";
import { Reason } from "../../protocol/reasons.js";
import type { TransactionJournal } from "../ports.js";
import { currentSettlement } from "../settlementScope.js";
import { isAlreadyKnown, isNonceError, isTransportError } from "./broadcastErrors.js";
import { GasPriceTooHighError, type FeeOracle } from "./feeOracle.js";
import { refusingClearly } from "./signer.js";
import type { EvmSignerPool } from "./signerPool.js";
import { ApprovalReason } from "./reasons.js";

export const ERC20_APPROVAL_KEY = ERC20_APPROVAL_GAS_SPONSORING.key;

export type ApprovalCheck = { ok: true } | { ok: false; reason: string; message: string };

/**
 * The most gas an approve may ask us to fund. An ERC-20 approve costs
 * 25,000 to 60,000 gas (more behind a proxy); the general per-transaction
 * ceiling is sized for batch claims, and the gas an approve leaves unused is
 * refunded to the payer, not to us.
 */
const APPROVE_MAX_GAS = 100_000n;

const OK: ApprovalCheck = { ok: true };
const PERMIT2 = getAddress(PERMIT2_ADDRESS);
const EXACT_PROXY = getAddress(x402ExactPermit2ProxyAddress);
const UPTO_PROXY = getAddress(x402UptoPermit2ProxyAddress);

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
  /** EVM_MAX_GAS_PER_TX: the approve's gas limit may not exceed it. */
  maxGasPerTransaction?: bigint;
  /** Bound on each receipt wait (funding, approve). */
  confirmationTimeoutMs: number;
}

/** A signed approve, decoded and with its signer recovered. */
interface SignedApprove {
  tx: TransactionSerializable;
  hash: Hex;
  signer: Hex;
  token: Hex;
  spender: Hex;
  amount: bigint;
  gas: bigint;
  /** maxFeePerGas, or gasPrice for the older types. */
  maxFee: bigint;
}

/** Decodes a signed approve offline, or says what is wrong with it. */
async function readApprove(
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
      tx,
      hash: keccak256(raw),
      signer: getAddress(signer),
      token: getAddress(tx.to),
      spender: getAddress(spender),
      amount,
      gas: tx.gas ?? 0n,
      maxFee: maxFee ?? 0n,
    },
  };
}

/**
 * The Permit2 settlement a sponsored approve is sent for: the amount it
 * moves (which Permit2's allowance must cover) and, for `upto`, the one
 * account of ours the proxy accepts it from (the witness's facilitator).
 */
function settlementOf(call: { to: Hex; data: Hex }): { needed: bigint; sender?: Hex } {
  const to = getAddress(call.to);
  try {
    if (to === EXACT_PROXY) {
      const d = decodeFunctionData({ abi: x402ExactPermit2ProxyABI, data: call.data });
      if (d.functionName === "settle") {
        const [permit] = d.args as unknown as [{ permitted: { amount: bigint } }];
        return { needed: permit.permitted.amount };
      }
    } else if (to === UPTO_PROXY) {
      const d = decodeFunctionData({ abi: x402UptoPermit2ProxyABI, data: call.data });
      if (d.functionName === "settle") {
        const [, amount, , witness] = d.args as unknown as [
          unknown,
          bigint,
          unknown,
          { facilitator: Hex },
        ];
        return { needed: amount, sender: getAddress(witness.facilitator) };
      }
    }
  } catch {
    // falls through: not a settlement we send an approve for
  }
  throw new Error(
    `${ApprovalReason.failed}: the call after the approve is not a Permit2 proxy settlement`,
  );
}

function permit2AuthorizationOf(
  payload: PaymentPayload,
): { from: string; permitted: { amount: string } } | undefined {
  const auth = (payload.payload as Record<string, unknown> | undefined)?.["permit2Authorization"];
  if (typeof auth !== "object" || auth === null) return undefined;
  const a = auth as { from?: unknown; permitted?: { amount?: unknown } };
  if (typeof a.from !== "string" || !isAddress(a.from, { strict: false })) return undefined;
  const amount = a.permitted?.amount;
  if (typeof amount !== "string" || !/^\d{1,78}$/.test(amount)) return undefined;
  return { from: a.from, permitted: { amount } };
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

  constructor(private readonly opts: ApprovalSponsorOptions) {
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
    const declared = payload.extensions?.[ERC20_APPROVAL_KEY] as { info?: unknown } | undefined;
    const auth = permit2AuthorizationOf(payload);
    // Only a Permit2 payment uses the extension (the mechanisms ignore it on
    // any other), and only with a signed approve in it: a client that needs
    // none echoes the resource server's declaration as it was.
    const signed = (declared?.info as Record<string, unknown> | undefined)?.["signedTransaction"];
    if (signed === undefined || !auth) return OK;
    const fail = (reason: string, message: string): ApprovalCheck => ({
      ok: false,
      reason,
      message,
    });
    const info = extractErc20ApprovalGasSponsoringInfo(payload);
    if (!info || !validateErc20ApprovalGasSponsoringInfo(info)) {
      return fail(
        ApprovalReason.format,
        "extensions.erc20ApprovalGasSponsoring.info must carry from, asset, spender, amount, signedTransaction and version",
      );
    }
    const payer = getAddress(auth.from);
    const asset = getAddress(requirements.asset);
    const needed = BigInt(auth.permitted.amount);
    if (getAddress(info.from) !== payer) {
      return fail(
        ApprovalReason.from,
        `the approval's from is ${info.from}, the payer is ${payer}`,
      );
    }
    if (getAddress(info.asset) !== asset) {
      return fail(ApprovalReason.asset, `the approval's asset must be ${asset}`);
    }
    if (getAddress(info.spender) !== PERMIT2) {
      return fail(ApprovalReason.spender, `the approval's spender must be Permit2 (${PERMIT2})`);
    }
    const read = await readApprove(info.signedTransaction);
    if (!read.ok) return read;
    const a = read.approve;
    if (a.tx.chainId !== this.opts.chainId) {
      return fail(
        ApprovalReason.chain,
        `the approve must be signed for chain id ${this.opts.chainId} (EIP-155), not ${a.tx.chainId ?? "none"}`,
      );
    }
    if (a.token !== asset) {
      return fail(ApprovalReason.target, `the approve must be sent to the asset ${asset}`);
    }
    if (a.spender !== PERMIT2) {
      return fail(ApprovalReason.txSpender, `the approve must approve Permit2 (${PERMIT2})`);
    }
    if (a.signer !== payer) {
      return fail(ApprovalReason.signer, `the approve is signed by ${a.signer}, not the payer`);
    }
    if ((a.tx.value ?? 0n) !== 0n) {
      return fail(ApprovalReason.value, "the approve may not send native value");
    }
    if (a.amount !== BigInt(info.amount)) {
      return fail(
        ApprovalReason.amount,
        "the approval's amount differs from the amount the signed approve approves",
      );
    }
    if (a.amount < needed) {
      return fail(
        ApprovalReason.amount,
        `the approve allows Permit2 ${a.amount}, less than the payment's ${needed}`,
      );
    }
    const configured = this.opts.maxGasPerTransaction;
    const gasCeiling =
      configured !== undefined && configured < APPROVE_MAX_GAS ? configured : APPROVE_MAX_GAS;
    if (a.gas > gasCeiling) {
      return fail(
        ApprovalReason.gas,
        `the approve's gas limit ${a.gas} is above the ceiling of ${gasCeiling} for an approve`,
      );
    }
    // Permit2 may already hold enough (an earlier approve): this one is not sent.
    if ((await this.allowance(a.token, payer)) >= needed) return OK;
    return this.fundable(a, needed);
  }

  /**
   * Whether an approve we are about to fund and send can do its job now:
   * the payer's next nonce, a fee within what we pay and above the base fee,
   * and the tokens the payment moves. Asked at verify and again right before
   * the funding at settle, since a settle need not follow a verify and the
   * chain moves between them: no gas is funded for an approve or a payment
   * that cannot go through.
   */
  private async fundable(a: SignedApprove, needed: bigint): Promise<ApprovalCheck> {
    const fail = (reason: string, message: string): ApprovalCheck => ({
      ok: false,
      reason,
      message,
    });
    const { client } = this.opts;
    const [nextNonce, ours, baseFee, held] = await Promise.all([
      client.getTransactionCount({ address: a.signer, blockTag: "pending" }),
      this.opts.fees.forNewTransaction().catch((e: unknown) => {
        if (e instanceof GasPriceTooHighError) return e;
        throw e;
      }),
      this.opts.fees.baseFee(),
      client.readContract({
        address: a.token,
        abi: erc20Abi,
        functionName: "balanceOf",
        args: [a.signer],
      }),
    ]);
    if (a.tx.nonce !== nextNonce) {
      return fail(
        ApprovalReason.nonce,
        `the approve's nonce is ${a.tx.nonce ?? "missing"}, the payer's next nonce is ${nextNonce}: sign it again`,
      );
    }
    if (ours instanceof GasPriceTooHighError) return fail(Reason.gasPriceTooHigh, ours.message);
    if (a.maxFee > ours.maxFeePerGas) {
      return fail(
        ApprovalReason.feeTooHigh,
        `the approve offers up to ${a.maxFee} wei per gas; this network is paid at most ${ours.maxFeePerGas} now`,
      );
    }
    if (baseFee !== undefined && a.maxFee < baseFee) {
      return fail(
        ApprovalReason.feeTooLow,
        `the approve offers up to ${a.maxFee} wei per gas, below the base fee of ${baseFee}: it would not be mined`,
      );
    }
    if (held < needed) {
      return fail(
        Reason.insufficientFunds,
        `the payer holds ${held} of the ${needed} the payment moves: no approve is funded for it`,
      );
    }
    return OK;
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
    const target = settlementOf(settle);
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
    const fundable = await this.fundable(a, needed);
    if (!fundable.ok) throw new Error(`${ApprovalReason.failed}: ${fundable.message}`);
    await this.fund(a);
    await this.opts.journal.sent({
      network: this.opts.network,
      reference: a.hash,
      // Not one of our accounts: the payer signed it, so no `signer`.
      detail: { raw, nonce: a.tx.nonce, payer: a.signer, sponsored: ERC20_APPROVAL_KEY },
    });
    const scope = currentSettlement()?.notes;
    if (scope) scope.sent = true;
    await this.broadcast(raw, a.hash);
    const receipt = await this.receipt(a.hash, "the payer's approve");
    await this.opts.journal.finished(a.hash, receipt.status, receipt.blockNumber);
    if (receipt.status !== "success") {
      throw new Error(`${ApprovalReason.failed}: the payer's approve ${a.hash} reverted`);
    }
    return a.hash;
  }

  /** Sends the payer what its approve's gas may cost beyond what it holds (nothing if it holds enough). */
  private async fund(a: SignedApprove): Promise<void> {
    const { client, pool } = this.opts;
    const cost = a.gas * a.maxFee;
    // Pending: a funding sent by an earlier attempt and not yet mined counts.
    const balance = await client.getBalance({ address: a.signer, blockTag: "pending" });
    if (balance >= cost) return;
    const value = cost - balance;
    // A plain account takes a transfer for 21,000 gas; one with code (an
    // EIP-7702 delegation) may run some, so ask the node.
    const code = await client.getCode({ address: a.signer });
    const gas =
      code && code !== "0x"
        ? ((await client.estimateGas({ account: pool.addresses[0]!, to: a.signer, value })) * 12n) /
          10n
        : 21_000n;
    const hash = await refusingClearly(() => pool.send({ to: a.signer, data: "0x", gas, value }));
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
