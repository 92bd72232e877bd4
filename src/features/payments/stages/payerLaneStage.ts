/**
 * Stage: the payer's lane (see payerLanes.ts). It stands before the
 * intent stage, whose statement checks the payer's cooling, so a settle
 * that waited behind the payer's previous one reads that one's outcome: a
 * failure of the payer's own doing refuses it there, before anything is
 * sent.
 */
import { settleRefusal } from "../../../protocol/answers.js";
import { Reason } from "../../../protocol/reasons.js";
import type { PayerLanes } from "../payerLanes.js";
import type { SettleStage } from "./pipeline.js";

export function payerLaneStage(lanes: PayerLanes): SettleStage {
  return {
    name: "payer-lane",
    run(ctx, next) {
      const payer = ctx.payment.payer;
      if (!payer) return next();
      const network = ctx.request.paymentRequirements.network;
      const key = `${network}|${payer.toLowerCase()}`;
      return lanes.run(
        key,
        next,
        (why) =>
          settleRefusal(
            {
              reason: Reason.payerSettlementInFlight,
              message:
                why === "queue_full"
                  ? `too many settles of payments from ${payer} are waiting on ${network}: each waits for the one before it to finish. Nothing was sent; retry later`
                  : `a settle of another payment from ${payer} on ${network} did not finish in time: each waits for the one before it. Nothing was sent; retry later`,
              payer,
            },
            network,
          ),
        ctx.payment.authorizationKey,
      );
    },
  };
}
