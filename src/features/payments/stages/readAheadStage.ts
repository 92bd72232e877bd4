/**
 * Stage: read ahead. Starts the chain reads the mechanism's re-verification
 * will make (a Solana simulation) before the stages that write the
 * service's own records, so the two overlap: the records (payer cooling,
 * intent, quota) then cost a settle no time of their own while the chain
 * answers. It decides nothing; a settle refused by a later stage only
 * leaves a read nobody takes. Placed after the idempotency stage, whose
 * replays never reach the chain.
 */
import type { PaymentEngine } from "../engine.js";
import type { SettleStage } from "./pipeline.js";

export function readAheadStage(engine: Pick<PaymentEngine, "readAhead">): SettleStage {
  return {
    name: "read-ahead",
    run(ctx, next) {
      engine.readAhead?.(ctx.payment);
      return next();
    },
  };
}
