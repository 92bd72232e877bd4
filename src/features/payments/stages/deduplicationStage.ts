/**
 * Stage: one authorization, one transaction. If the signed authorization
 * already has a live record (pending or succeeded), this request is a
 * duplicate or a retry: it is answered from that record and sends nothing.
 */
import type { SettlementJoiner } from "../settlementJoiner.js";
import type { SettlementRecorder } from "../../settlements/settlementRecorder.js";
import type { SettleStage } from "./pipeline.js";

export function deduplicationStage(
  recorder: SettlementRecorder,
  joiner: SettlementJoiner,
): SettleStage {
  return {
    name: "deduplication",
    async run(ctx, next) {
      const live = await recorder.findLive(ctx.authorizationKey);
      // undefined: the record was withdrawn before anything was sent.
      const answer = live ? await joiner.join(ctx, live) : undefined;
      return answer ?? next();
    },
  };
}
