/**
 * Stage: a payer that just cost us gas is refused. A payer whose own
 * payment failed on-chain (its wallet's code, or its own move of the funds
 * or the nonce: see chains' `failureCause`) is refused for a cooling period,
 * on every account, before any row is written or anything sent. One hostile
 * wallet then costs us at most one failed transaction per cooling period,
 * however many merchants it pays, and never uses up a merchant's failure
 * limit (that counts only what the merchant's requirements cause).
 *
 * One read per settle, batched with concurrent ones (the verify's too),
 * which finds nothing for an honest payer. A
 * verify answers the same refusal (see `PaymentService.verify`). A cooling
 * payer's retry of a payment already on record is let through to the intent
 * stage, which answers it from that record.
 */
import { Reason } from "../../../protocol/reasons.js";
import { settleRefusal } from "../../../protocol/answers.js";
import type { SettlementRecorder } from "../../settlements/settlementRecorder.js";
import type { SettleStage } from "./pipeline.js";

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

export function payerCoolingStage(
  recorder: SettlementRecorder,
  coolingMs: number,
  now: () => number = Date.now,
): SettleStage {
  return {
    name: "payer-cooling",
    async run(ctx, next) {
      const network = ctx.request.paymentRequirements.network;
      const payer = ctx.payment.payer;
      const at = now();
      // One batched read, shared with concurrent settles and verifies: the
      // payment's own live record, and the payer's latest own failure.
      const {
        row,
        payerFailedAt: last,
        payerKnown,
      } = await recorder.reads.lookUpLive(ctx.payment.authorizationKey, {
        network,
        payer,
        since: new Date(at - coolingMs),
      });
      if (payerKnown !== undefined) ctx.payer.known = payerKnown;
      if (!last) return next();
      // A payment already on record (a retry of one sent, perhaps landed)
      // is answered from its record by the intent stage: "nothing was sent"
      // would be untrue of it.
      if (row) return next();
      const refusal = coolingRefusal(payer, last, coolingMs, at);
      return settleRefusal(
        { ...refusal, message: `${refusal.message}. Nothing was sent` },
        network,
      );
    },
  };
}
