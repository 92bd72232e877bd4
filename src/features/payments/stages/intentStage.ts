/**
 * Stage: intent before broadcast, and one authorization, one transaction.
 * Writes the `pending` row that makes this request the one owner of its
 * authorization, and hands the settlement it opens (its row, its payment,
 * later its quota reservation and what was sent) to the stages after it. If
 * the authorization already has a live record (a duplicate, a retry, a
 * replay, another payment reusing its nonce), the insert is refused by the
 * unique index, this request sends nothing, and the record decides its
 * answer (see ../duplicates.ts). One statement either way, shared with the
 * intents of concurrent settles (group commit): the common case, a new
 * payment, reads nothing first, and nothing is sent before the insert that
 * carries this row has committed. A repeatable operation's succeeded record
 * gives up its key to the next run.
 *
 * With payer cooling on, the same statement reads the payer's history
 * (payerCooling.ts): a payer whose own payment failed on-chain lately gets
 * no row and is refused before anything is sent, except for a retry of a
 * payment already on record, which that record answers; and the settlement
 * learns whether its payer has a success on record, for the failed-fee
 * budget's tiers.
 */
import type { DuplicateSettles } from "../duplicates.js";
import type { SettlementRecorder } from "../../settlements/settlementRecorder.js";
import { Settlement } from "../../settlements/settlement.js";
import { ServiceError } from "../../../lib/errors.js";
import { settleRefusal } from "../../../protocol/answers.js";
import { coolingRefusal } from "./payerCooling.js";
import type { OpeningStage } from "./pipeline.js";

export function intentStage(
  recorder: SettlementRecorder,
  duplicates: DuplicateSettles,
  /** How long a payer whose own payment failed on-chain is refused (0: never). */
  coolingMs = 0,
  /** The quota stage follows: ask its reservation in the intent's statement (`SettleIntent.reserve`). */
  reserve = false,
  now: () => number = Date.now,
): OpeningStage {
  return {
    name: "intent",
    async run(ctx, next) {
      const network = ctx.request.paymentRequirements.network;
      // Each round needs another request to win the row and then give it up
      // (fail, or be refused its quota), so a few rounds always suffice.
      for (let attempt = 0; attempt < 5; attempt++) {
        const at = now();
        const { settlement, payerFailedAt } = await Settlement.openChecked(
          recorder,
          {
            principal: ctx.principal,
            payment: ctx.payment,
            units: ctx.units,
            requestId: ctx.requestId,
            reserve,
          },
          coolingMs > 0 ? new Date(at - coolingMs) : undefined,
        );
        // A reservation granted with the intent is the settlement's: the
        // quota stage after releases it, and so does this one should a
        // stage between end the settle first.
        if (settlement)
          return duplicates.own(
            settlement.id,
            next(settlement).finally(() => settlement.release()),
          );
        // The authorization has a live record, or the payer is cooling:
        // nothing of ours is recorded or sent.
        const live = await recorder.reads.findLive(ctx.payment.authorizationKey);
        if (!live && payerFailedAt) {
          const refusal = coolingRefusal(ctx.payment.payer, payerFailedAt, coolingMs, at);
          return settleRefusal(
            { ...refusal, message: `${refusal.message}. Nothing was sent` },
            network,
          );
        }
        if (live?.status === "succeeded" && ctx.payment.repeatable) {
          // Done once, and anyone may run it again: the next run is a row of its own.
          await recorder.retireKey(live.id);
          continue;
        }
        const answer = live ? await duplicates.answer(ctx, live) : undefined;
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
