/**
 * Stage: intent before broadcast. Writes the `pending` row that makes this
 * request the one owner of its authorization; a concurrent duplicate that
 * wrote first makes this request join it instead. Duplicates in this process
 * wait on the owner's answer directly.
 */
import type { SettlementJoiner } from "../settlementJoiner.js";
import type { SettlementRecorder } from "../../settlements/settlementRecorder.js";
import { ServiceError } from "../../../lib/errors.js";
import type { SettleStage } from "./pipeline.js";

export function intentStage(recorder: SettlementRecorder, joiner: SettlementJoiner): SettleStage {
  return {
    name: "intent",
    async run(ctx, next) {
      // Each round needs another request to win the row and then give it up
      // (fail, or be refused its quota), so a few rounds always suffice.
      for (let attempt = 0; attempt < 5; attempt++) {
        ctx.startedAt = Date.now();
        const id = await recorder.begin({
          principal: ctx.principal,
          request: ctx.request,
          authorizationKey: ctx.authorizationKey,
          payer: ctx.payer,
          units: ctx.units,
        });
        if (id !== undefined) {
          ctx.settlementId = id;
          return joiner.own(id, next());
        }
        // Lost the race to a duplicate: nothing of ours is recorded or sent.
        const live = await recorder.findLive(ctx.authorizationKey);
        const answer = live ? await joiner.join(ctx, live) : undefined;
        if (answer) return answer;
      }
      throw new ServiceError(
        "service_unavailable",
        "this payment is being settled by concurrent requests; retry shortly",
        { retryable: true },
      );
    },
  };
}
