/**
 * Stages: confidential settlement (spec 4.6).
 *
 * The receipt stage sits before the intent stage, so a duplicate or a retry
 * that joins an earlier attempt gets the receipt too. The gate stage sits
 * just before the mechanism: a refusal there is recorded as a failed
 * settlement by the commit stage like any other, and the credit row is
 * committed before the transfer can be broadcast.
 */
import type { ConfidentialGate } from "../../confidential/confidentialGate.js";
import type { SettleStage } from "./pipeline.js";

export function confidentialReceiptStage(gate: ConfidentialGate): SettleStage {
  return {
    name: "confidential-receipt",
    async run(ctx, next) {
      const result = await next();
      if (!gate.concerns(ctx.request)) return result;
      return gate.withReceipt(ctx.principal.accountId, ctx.authorizationKey, ctx.request, result);
    },
  };
}

export function confidentialGateStage(gate: ConfidentialGate): SettleStage {
  return {
    name: "confidential-gate",
    async run(ctx, next) {
      if (!gate.concerns(ctx.request)) return next();
      const refusal = await gate.refusal(ctx.principal.accountId, ctx.request);
      if (refusal) {
        return {
          success: false,
          errorReason: refusal.reason,
          errorMessage: refusal.message,
          transaction: "",
          network: ctx.request.paymentRequirements.network,
          ...(ctx.payer ? { payer: ctx.payer } : {}),
        };
      }
      await gate.recordCredit(ctx.principal.accountId, ctx.authorizationKey, ctx.request);
      return next();
    },
  };
}
