/**
 * Payer cooling: a payer that just cost us gas is refused. A payer whose
 * own payment failed on-chain (its wallet's code, or its own move of the
 * funds or the nonce: see chains' `failureCause`) is refused for a cooling
 * period, on every account, before any row is written or anything sent.
 * One hostile wallet then costs us at most one failed transaction per
 * cooling period, however many merchants it pays, and never uses up a
 * merchant's failure limit (that counts only what the merchant's
 * requirements cause).
 *
 * A settle checks it in its intent's own statement (intentStage.ts), which
 * finds nothing for an honest payer; a verify, in its batched read of the
 * payment's record (see `PaymentService.verify`), and answers the same
 * refusal.
 */
import { Reason } from "../../../protocol/reasons.js";

/** The refusal of a payer whose own payment failed on-chain at `last`, cooling until `last + coolingMs`. */
export function coolingRefusal(
  payer: string | undefined,
  last: Date,
  coolingMs: number,
  at: number,
): { reason: string; message: string; payer: string | undefined } {
  const seconds = Math.max(1, Math.ceil((last.getTime() + coolingMs - at) / 1000));
  return {
    reason: Reason.payerFailedOnchainRecently,
    message: `a payment from ${payer} failed on-chain in the last ${Math.round(coolingMs / 1000)} s because of the payer's wallet or funds, at the facilitator's gas cost; its payments are refused for another ${seconds} s`,
    payer,
  };
}
