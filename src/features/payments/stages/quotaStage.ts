/**
 * Stage: the monthly quota. Runs after the intent row made this request the
 * one owner of its authorization, so duplicates of one payment never hold
 * quota. Reserves the payment's units before anything is sent (402 when
 * exhausted, and the intent row is withdrawn: nothing was attempted), in one
 * transaction with the reservations of concurrent settles (group commit). The
 * commit stage gives the reservation back in the transaction that records
 * the outcome, where a success is charged; a settle that throws before that
 * gives it back here.
 */
import type { QuotaLedger } from "../../plans/quotaLedger.js";
import type { SettlementRecorder } from "../../settlements/settlementRecorder.js";
import type { SettleStage } from "./pipeline.js";

export function quotaStage(quota: QuotaLedger, recorder: SettlementRecorder): SettleStage {
  return {
    name: "quota",
    async run(ctx, next) {
      if (ctx.units <= 0) return next();
      try {
        ctx.reservation = await quota.reserve(ctx.principal.accountId, ctx.units);
      } catch (e) {
        await recorder.withdraw(ctx.settlementId!);
        throw e;
      }
      try {
        return await next();
      } catch (e) {
        // Only reached when the outcome was not recorded (the commit stage
        // releases in its own transaction).
        if (ctx.reservation) await quota.settle(ctx.reservation, false, null);
        throw e;
      } finally {
        ctx.reservation = undefined;
      }
    },
  };
}
