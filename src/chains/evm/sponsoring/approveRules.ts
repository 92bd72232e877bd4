/**
 * The checks of a sponsored approve that need no chain: what the payment's
 * `erc20ApprovalGasSponsoring` extension says, and the signed approve in
 * it, against the payment itself. The approve must be for this chain
 * (EIP-155 chain id), sent to the payment's asset, approve Permit2 for at
 * least the payment (the extension's `amount` saying the same), be signed
 * by the payer, send no native value, and ask no more gas than an approve
 * may. What needs the chain (nonce, fees, balances, funding) is
 * approveFunding.ts.
 */
import {
  extractErc20ApprovalGasSponsoringInfo,
  validateErc20ApprovalGasSponsoringInfo,
  ERC20_APPROVAL_GAS_SPONSORING,
} from "@x402/extensions";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { getAddress } from "viem";
import { ApprovalReason } from "../reasons.js";
import { readApprove, type SignedApprove } from "./signedApprove.js";
import { PERMIT2, permit2AuthorizationOf } from "./sponsoredSettlement.js";

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
 * A payment's approve as far as it can be judged offline: refused with its
 * reason; passed with nothing to check further (the payment carries no
 * signed approve, or is no Permit2 payment); or passed so far, with the
 * approve and the amount Permit2's allowance must cover for the chain's
 * checks to take up.
 */
export type OfflineApprove =
  | { ok: false; reason: string; message: string }
  | { ok: true; approve?: undefined }
  | { ok: true; approve: SignedApprove; needed: bigint };

/** The checks of the file comment, on a chain of id `chainId`. */
export async function checkApproveOffline(
  payload: PaymentPayload,
  requirements: PaymentRequirements,
  chainId: number,
  maxGasPerTransaction: bigint | undefined,
): Promise<OfflineApprove> {
  const declared = payload.extensions?.[ERC20_APPROVAL_KEY] as { info?: unknown } | undefined;
  const auth = permit2AuthorizationOf(payload);
  // Only a Permit2 payment uses the extension (the mechanisms ignore it on
  // any other), and only with a signed approve in it: a client that needs
  // none echoes the resource server's declaration as it was.
  const signed = (declared?.info as Record<string, unknown> | undefined)?.["signedTransaction"];
  if (signed === undefined || !auth) return { ok: true };
  const fail = (reason: string, message: string): OfflineApprove => ({
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
    return fail(ApprovalReason.from, `the approval's from is ${info.from}, the payer is ${payer}`);
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
  if (a.tx.chainId !== chainId) {
    return fail(
      ApprovalReason.chain,
      `the approve must be signed for chain id ${chainId} (EIP-155), not ${a.tx.chainId ?? "none"}`,
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
  const configured = maxGasPerTransaction;
  const gasCeiling =
    configured !== undefined && configured < APPROVE_MAX_GAS ? configured : APPROVE_MAX_GAS;
  if (a.gas > gasCeiling) {
    return fail(
      ApprovalReason.gas,
      `the approve's gas limit ${a.gas} is above the ceiling of ${gasCeiling} for an approve`,
    );
  }
  return { ok: true, approve: a, needed };
}
