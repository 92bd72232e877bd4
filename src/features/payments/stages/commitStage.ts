/**
 * Stage: commit. The outcome, its webhook event (outbox), the quota charge of
 * a success and the release of the reservation go in one transaction,
 * shared with the outcomes of concurrent settles (group commit), and the
 * answer leaves only once that transaction has committed.
 */
import type { SettlementRecorder } from "../../settlements/settlementRecorder.js";
import type { SettleStage } from "./pipeline.js";

export function commitStage(recorder: SettlementRecorder): SettleStage {
  return {
    name: "commit",
    async run(ctx, next) {
      const result = await next();
      await recorder.finish(ctx.settlementId!, result, ctx.startedAt, ctx.reservation);
      ctx.reservation = undefined;
      return result;
    },
  };
}
