/**
 * Stages: confidential settlement (spec 4.6).
 *
 * The receipt stage sits before the intent stage, so the re-presentation of
 * a pending payment that collects its success gets the receipt too; it
 * writes the credit only after the commit stage recorded the success (the
 * mechanism has verified the signature and the money arrived), from that
 * record. The gate stage sits just before the mechanism: it refuses (a
 * refusal there is recorded as a failed settlement by the commit stage like
 * any other, and nothing of the request is kept as a credit), and binds a
 * payment it lets through to the merchant's slot, so the vault's `collect`
 * stores that commitment with the payment.
 */
import type { ConfidentialGate } from "../../confidential/confidentialGate.js";
import { isServiceError } from "../../../lib/errors.js";
import { settleRefusal } from "../../../protocol/answers.js";
import type { SettleStage, SettlementStage } from "./pipeline.js";

export function confidentialReceiptStage(gate: ConfidentialGate): SettleStage {
  return {
    name: "confidential-receipt",
    async run(ctx, next) {
      const result = await next();
      if (!gate.concerns(ctx.request)) return result;
      return gate.withReceipt(
        ctx.principal.accountId,
        ctx.payment.authorizationKey,
        ctx.request,
        result,
      );
    },
  };
}

export function confidentialGateStage(gate: ConfidentialGate): SettlementStage {
  return {
    name: "confidential-gate",
    async run(ctx, next) {
      if (!gate.concerns(ctx.request)) return next();
      let refusal;
      try {
        refusal = await gate.refusal(ctx.principal.accountId, ctx.request);
      } catch (e) {
        // Its records unreachable, nothing was sent: the row says so, and
        // the caller gets the 503 (an outage, never the payer's failure).
        if (!isServiceError(e) || e.code !== "service_unavailable") throw e;
        await ctx.settlement.notAttempted(e.message);
        throw e;
      }
      if (refusal) {
        return settleRefusal(
          { ...refusal, payer: ctx.payment.payer },
          ctx.request.paymentRequirements.network,
        );
      }
      try {
        // The commitment to the merchant's slot that `collect` will store.
        await gate.attribute(ctx.principal.accountId, ctx.request);
      } catch (e) {
        if (!isServiceError(e) || e.code !== "service_unavailable") throw e;
        await ctx.settlement.notAttempted(e.message);
        throw e;
      }
      return next();
    },
  };
}
