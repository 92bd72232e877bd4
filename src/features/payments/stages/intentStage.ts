/**
 * Stage: intent before broadcast. Writes the `pending` row that makes this
 * request the one owner of its authorization; a concurrent duplicate that
 * wrote first makes this request join it instead. Duplicates in this process
 * wait on the owner's answer directly.
 */
import type { SettlementJoiner } from "../settlementJoiner.js";
import type { SettlementRecorder } from "../../settlements/settlementRecorder.js";
import type { QuotaLedger } from "../../plans/quotaLedger.js";
import type { SettleStage } from "./pipeline.js";

export function intentStage(
  recorder: SettlementRecorder,
  joiner: SettlementJoiner,
  quota: QuotaLedger | undefined,
): SettleStage {
  return {
    name: "intent",
    async run(ctx, next) {
      ctx.startedAt = Date.now();
      const id = await recorder.begin({
        principal: ctx.principal,
        request: ctx.request,
        authorizationKey: ctx.authorizationKey,
        payer: ctx.payer,
        units: ctx.units,
      });
      if (id === undefined) {
        // Lost the race to a duplicate: nothing of ours is recorded or sent.
        if (ctx.reservation && quota) await quota.settle(ctx.reservation, false, null);
        ctx.reservation = undefined;
        const live = await recorder.findLive(ctx.authorizationKey);
        if (live) return joiner.join(ctx, live);
        // The owner finished with a failure in between: try once more as owner.
        return this.run(ctx, next);
      }
      ctx.settlementId = id;
      return joiner.own(id, next());
    },
  };
}
