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
  BATCH_SETTLEMENT_ADDRESS,
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
  parseAbi,
  parseTransaction,
  recoverTransactionAddress,
  type Hex,
  type PublicClient,
  type TransactionReceipt,
  type TransactionSerializable,
} from "viem";
import { Reason } from "../../../protocol/reasons.js";
import type { FundingRefusal, SponsoredFundings, TransactionJournal } from "../../ports.js";
import { currentSettlement } from "../../settlementScope.js";
import { isAlreadyKnown, isNonceError, isTransportError } from "../signer/broadcastErrors.js";
import { GasPriceTooHighError, type FeeOracle } from "../rpc/feeOracle.js";
import { refusingClearly } from "../signer/signer.js";
import type { EvmSignerPool } from "../signer/signerPool.js";
import { ApprovalReason } from "../reasons.js";

export const ERC20_APPROVAL_KEY = ERC20_APPROVAL_GAS_SPONSORING.key;

export type ApprovalCheck = { ok: true } | { ok: false; reason: string; message: string };

/**
 * The most gas an approve may ask us to fund. An ERC-20 approve costs
 * 25,000 to 60,000 gas (more behind a proxy); the general per-transaction
 * ceiling is sized for batch claims, and the gas an approve leaves unused is
 * refunded to the payer, not to us.
 */
const APPROVE_MAX_GAS = 100_000n;

/**
 * A funded approve's gas limit may be up to 160% of what the node says it
 * needs: the official client signs 70,000 for a fresh allowance slot that
 * costs about 46,400 (151%).
 */
const APPROVE_GAS_HEADROOM_PERCENT = 160n;

/**
 * The most of a funding a payer may be left holding after its approve, at
 * today's base fee: the chain makes it hold gas limit × max fee up front,
 * and whatever the approve does not burn stays with it.
 */
const MAX_KEPT_PERCENT = 40n;

/** A plain transfer of native value runs no code and costs exactly this. */
const PLAIN_TRANSFER_GAS = 21_000n;

/** The OP-stack GasPriceOracle predeploy, which prices a transaction's L1 data fee. */
const GAS_PRICE_ORACLE = "0x420000000000000000000000000000000000000F" as const;
const GAS_PRICE_ORACLE_ABI = parseAbi(["function getL1Fee(bytes) view returns (uint256)"]);

const min = (x: bigint, y: bigint) => (x < y ? x : y);

/** The record's refusal, in this family's words. */
function fundingRefused(r: FundingRefusal): { ok: false; reason: string; message: string } {
  const reason =
    r.kind === "already_funded" ? ApprovalReason.alreadyFunded : ApprovalReason.budgetSpent;
  return { ok: false, reason, message: r.message };
}

const OK: ApprovalCheck = { ok: true };
const PERMIT2 = getAddress(PERMIT2_ADDRESS);
const EXACT_PROXY = getAddress(x402ExactPermit2ProxyAddress);
const UPTO_PROXY = getAddress(x402UptoPermit2ProxyAddress);
const BATCH_ESCROW = getAddress(BATCH_SETTLEMENT_ADDRESS);
/**
 * The batch-settlement escrow's Permit2 deposit collector: the CREATE2
 * address `@x402/evm` deposits through, which its index does not export.
 */
const PERMIT2_DEPOSIT_COLLECTOR = getAddress("0x4020425FAf3B746C082C2f942b4E5159887B0005");
/** The escrow's deposit, the one call of it a sponsored approve is sent for. */
const ESCROW_DEPOSIT_ABI = parseAbi([
  "function deposit((address payer, address payerAuthorizer, address receiver, address receiverAuthorizer, address token, uint40 withdrawDelay, bytes32 salt) config, uint128 amount, address collector, bytes collectorData)",
]);

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

/** A signed approve, decoded and with its signer recovered. */
interface SignedApprove {
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

/**
 * The Permit2 settlement a sponsored approve is sent for: the amount it
 * moves (which Permit2's allowance must cover) and, for `upto`, the one
 * account of ours the proxy accepts it from (the witness's facilitator).
 * One per scheme that takes the extension: the exact and upto proxies'
 * `settle`, and a batch-settlement `deposit` through the Permit2 collector.
 * Undefined for any other call: no approve is sent or funded for it.
 */
function settlementOf(call: { to: Hex; data: Hex }): { needed: bigint; sender?: Hex } | undefined {
  try {
    const to = getAddress(call.to);
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
    } else if (to === BATCH_ESCROW) {
      const d = decodeFunctionData({ abi: ESCROW_DEPOSIT_ABI, data: call.data });
      const [, amount, collector] = d.args;
      if (getAddress(collector) === PERMIT2_DEPOSIT_COLLECTOR) return { needed: amount };
    }
  } catch {
    // falls through: not a settlement we send an approve for
  }
  return undefined;
}

const NOT_A_SETTLEMENT = `${ApprovalReason.failed}: the call after the approve is not a Permit2 settlement this service sponsors (exact or upto proxy settle, batch-settlement deposit through the Permit2 collector)`;

/**
 * The payment's Permit2 authorization, where each scheme puts it: at the
 * top of an exact or upto payload, in a batch-settlement deposit's
 * `deposit.authorization`.
 */
export function permit2AuthorizationOf(
  payload: PaymentPayload,
): { from: string; permitted: { amount: string } } | undefined {
  const inner = payload.payload as Record<string, unknown> | undefined;
  const deposit = inner?.["deposit"] as { authorization?: Record<string, unknown> } | undefined;
  const auth = inner?.["permit2Authorization"] ?? deposit?.authorization?.["permit2Authorization"];
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
  /** Whether the chain has the OP-stack GasPriceOracle (read once). */
  private oraclePresent: Promise<boolean> | undefined;

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
   * Whether an approve we are about to fund and send can do its job now,
   * and what funding it needs (0 when the payer holds the approve's gas):
   * the payer's next nonce, a fee within what we pay and above the base
   * fee, and the tokens the payment moves. When the payer lacks the gas,
   * also what keeps the funding to one approve's cost (see `fundingRefusal`).
   * Asked at verify and again right before the funding at settle, since a
   * settle need not follow a verify and the chain moves between them: no gas
   * is funded for an approve or a payment that cannot go through.
   */
  private async fundable(
    a: SignedApprove,
    needed: bigint,
  ): Promise<ApprovalCheck & { funding?: bigint }> {
    const fail = (reason: string, message: string): ApprovalCheck => ({
      ok: false,
      reason,
      message,
    });
    const { client } = this.opts;
    const [nextNonce, ours, baseFee, held, balance, l1Fee] = await Promise.all([
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
      // Pending: a funding sent by an earlier attempt and not yet mined counts.
      client.getBalance({ address: a.signer, blockTag: "pending" }),
      this.l1Fee(a),
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
    // What the chain makes the payer hold before it takes the approve.
    const upFront = a.gas * a.maxFee + l1Fee;
    if (balance >= upFront) return { ok: true, funding: 0n };
    const refused = await this.fundingRefusal(a, baseFee, upFront, l1Fee);
    return refused ?? { ok: true, funding: upFront - balance };
  }

  /**
   * Why a payer short of the approve's gas is not funded, or undefined:
   * - it has code (a contract, or an EIP-7702 delegation `0xef0100…`):
   *   code can take the funding elsewhere, or burn gas at the transfer;
   * - the approve's gas limit is below what this token's approve needs
   *   (it would fail and the payer keep the funding), or more than
   *   APPROVE_GAS_HEADROOM times it;
   * - what the chain requires up front (gas limit × max fee, plus the L1
   *   data fee on an OP-stack chain) is more than 1/(1 − MAX_KEPT) times
   *   what the approve costs at today's base fee: at most MAX_KEPT of the
   *   funding can be left over for the payer to keep;
   * - the payer was funded before and that payment did not settle, or the
   *   settling account's budget for fundings is spent.
   */
  private async fundingRefusal(
    a: SignedApprove,
    baseFee: bigint | undefined,
    upFront: bigint,
    l1Fee: bigint,
  ): Promise<ApprovalCheck | undefined> {
    const fail = (reason: string, message: string): ApprovalCheck => ({
      ok: false,
      reason,
      message,
    });
    const { client } = this.opts;
    const code = await client.getCode({ address: a.signer });
    if (code && code !== "0x") {
      return fail(
        ApprovalReason.payerHasCode,
        code.toLowerCase().startsWith("0xef0100")
          ? "the payer's account is delegated (EIP-7702) and holds too little gas for its approve: only a plain account is funded; it can pay its own gas"
          : "the payer is a contract and holds too little gas for its approve: only a plain account is funded",
      );
    }
    // An approve's cost depends on the token and on the payer's current
    // allowance slot; the node says what this one needs now.
    const need = await client.estimateGas({
      account: a.signer,
      to: a.token,
      data: a.tx.data ?? "0x",
    });
    if (a.gas < need) {
      return fail(
        ApprovalReason.gasTooLow,
        `the approve's gas limit ${a.gas} is below the ${need} it needs: it would fail`,
      );
    }
    const gasCeiling = (need * APPROVE_GAS_HEADROOM_PERCENT) / 100n;
    if (a.gas > gasCeiling) {
      return fail(
        ApprovalReason.gas,
        `the approve's gas limit ${a.gas} is more than ${APPROVE_GAS_HEADROOM_PERCENT}% of the ${need} it needs; only up to ${gasCeiling} is funded`,
      );
    }
    // The price the approve pays in a block at today's base fee.
    const price =
      baseFee === undefined ? a.maxFee : min(a.maxFee, baseFee + (a.tip ?? a.maxFee - baseFee));
    const cost = need * price + l1Fee;
    if ((upFront - cost) * 100n > upFront * MAX_KEPT_PERCENT) {
      return fail(
        ApprovalReason.overpriced,
        `funding this approve takes ${upFront} wei up front (gas limit ${a.gas} × max fee ${a.maxFee}${l1Fee > 0n ? ` + L1 fee ${l1Fee}` : ""}) for about ${cost} of real cost at today's base fee; at most ${MAX_KEPT_PERCENT}% may be left over: sign it with a lower gas limit or max fee`,
      );
    }
    const prior = await this.opts.fundings.refusal(this.opts.network, a.signer);
    return prior ? fundingRefused(prior) : undefined;
  }

  /**
   * The approve's L1 data fee on an OP-stack chain, from its GasPriceOracle
   * predeploy (priced on the signed bytes, a few bytes more than the chain
   * charges for). 0 elsewhere, and where the predeploy is absent (a devnet
   * made with plain anvil has none: no L1 fee is charged there either).
   */
  private async l1Fee(a: SignedApprove): Promise<bigint> {
    if (!this.opts.opStack) return 0n;
    this.oraclePresent ??= this.opts.client
      .getCode({ address: GAS_PRICE_ORACLE })
      .then((code) => code !== undefined && code !== "0x");
    if (!(await this.oraclePresent)) return 0n;
    return this.opts.client.readContract({
      address: GAS_PRICE_ORACLE,
      abi: GAS_PRICE_ORACLE_ABI,
      functionName: "getL1Fee",
      args: [a.raw],
    });
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
    const fundable = await this.fundable(a, needed);
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
