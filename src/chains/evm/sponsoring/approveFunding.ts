/**
 * The checks of a sponsored approve that read the chain, and what funding
 * it needs: the payer's next nonce, a fee within what we pay and above the
 * base fee, the tokens the payment moves; and, when the payer lacks the
 * approve's gas, what keeps a funding to one approve's cost (a plain
 * account, a gas limit near what the approve needs, little left over for
 * the payer to keep, no earlier unsettled funding, the account's budget).
 * Asked at verify and again right before the funding at settle. Sends
 * nothing.
 */
import { erc20Abi, parseAbi, type PublicClient } from "viem";
import { Reason } from "../../../protocol/reasons.js";
import type { FundingRefusal, SponsoredFundings } from "../../ports.js";
import { GasPriceTooHighError, type FeeOracle } from "../rpc/feeOracle.js";
import { ApprovalReason } from "../reasons.js";
import type { ApprovalCheck } from "./approveRules.js";
import type { SignedApprove } from "./signedApprove.js";

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

/** The OP-stack GasPriceOracle predeploy, which prices a transaction's L1 data fee. */
const GAS_PRICE_ORACLE = "0x420000000000000000000000000000000000000F" as const;
const GAS_PRICE_ORACLE_ABI = parseAbi(["function getL1Fee(bytes) view returns (uint256)"]);

const min = (x: bigint, y: bigint) => (x < y ? x : y);

/** The record's refusal, in this family's words. */
export function fundingRefused(r: FundingRefusal): { ok: false; reason: string; message: string } {
  const reason =
    r.kind === "already_funded" ? ApprovalReason.alreadyFunded : ApprovalReason.budgetSpent;
  return { ok: false, reason, message: r.message };
}

export interface ApproveFundingOptions {
  network: string;
  client: PublicClient;
  fees: FeeOracle;
  /** Who was funded already, and each account's budget. */
  fundings: SponsoredFundings;
  /** An OP-stack chain: the approve's L1 data fee is funded too (GasPriceOracle). */
  opStack: boolean;
}

/** A refusal of the approve, with its reason and what to tell the payer. */
const fail = (reason: string, message: string): { ok: false; reason: string; message: string } => ({
  ok: false,
  reason,
  message,
});

export class ApproveFunding {
  /** Whether the chain has the OP-stack GasPriceOracle (read once). */
  private oraclePresent: Promise<boolean> | undefined;

  constructor(private readonly opts: ApproveFundingOptions) {}

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
  async fundable(a: SignedApprove, needed: bigint): Promise<ApprovalCheck & { funding?: bigint }> {
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
}
