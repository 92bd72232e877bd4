/**
 * Stage: the monthly quota. Runs after the intent row made this request the
 * one owner of its authorization, so duplicates of one payment never hold
 * quota. The intent's own statement reserves the payment's units when they
 * fit (see `SettleIntent.reserve`); a settle it did not grant is decided
 * here, exactly, before anything is sent (402 when exhausted, and the
 * intent row is withdrawn: nothing was attempted), in one flush with the
 * reservations of concurrent settles (group commit).
 * The reservation is then the settlement's: the write that records the
 * outcome gives it back (charging a success) in the same transaction, and
 * when the settle ends without one, this stage has the settlement give it
 * back. Every settle asks, whatever its units (0 reserves nothing): a
 * suspended account is refused even a settle that costs no quota, and so is
 * an account over the on-chain failure limit on the network.
 */
import type { QuotaLedger } from "../../plans/quotaLedger.js";
import type { SettlementStage } from "./pipeline.js";

export function quotaStage(quota: QuotaLedger): SettlementStage {
  return {
    name: "quota",
    async run(ctx, next) {
      // Every settle asks, whatever its units: a suspended account, or one
      // whose settles keep failing on-chain at our gas cost, is refused even
      // a settle that costs no quota (a batch deposit, a refund, xrpl:0).
      const { settlement } = ctx;
      const network = ctx.request.paymentRequirements.network;
      if (!settlement.reserved) {
        try {
          settlement.hold(await quota.reserve(ctx.principal.accountId, ctx.units, network));
        } catch (e) {
          await settlement.withdraw();
          throw e;
        }
      }
      try {
        return await next();
      } finally {
        await settlement.release();
      }
    },
  };
}
