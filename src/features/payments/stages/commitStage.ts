/**
 * Stage: commit. The outcome, its webhook event (outbox), the quota charge of
 * a success and the release of the reservation go in one transaction,
 * shared with the outcomes of concurrent settles (group commit), and the
 * answer leaves only once that transaction has committed.
 *
 * A success is answered only when that transaction recorded it as this
 * request's: the payment's one success answer. Were it already given to
 * another request (a retry that learned the outcome from the chain first),
 * this one is a duplicate. Were the outcome not recorded at all (the
 * database failing), the answer is `settlement_pending` with the hash: the
 * payment landed, and the record the reconciler finishes later lets exactly
 * one re-presentation collect it.
 *
 * A failure after something was sent is charged first to whoever caused it
 * (the payer or the account's requirements: see chains' `failureCause`).
 */
import { Reason } from "../../../protocol/reasons.js";
import { settlePending, settleRefusal } from "../../../protocol/answers.js";
import type { PaymentEngine } from "../engine.js";
import type { SettlementStage } from "./pipeline.js";

/** Reasons that say the service refused, not that the payment or its payer failed. */
const SERVICE_REFUSALS: ReadonlySet<string> = new Set([
  Reason.failedSettlementGasBudgetSpent,
  Reason.noSignerAvailable,
  Reason.gasPriceTooHigh,
]);

export function commitStage(engine?: Pick<PaymentEngine, "failureCause">): SettlementStage {
  return {
    name: "commit",
    async run(ctx, next) {
      const result = await next();
      const { settlement } = ctx;
      // A failure after something was sent cost us gas: name who caused it
      // (the payer, or the account's requirements) before the row is final,
      // so each failure limit counts only its own party's.
      if (engine && !result.success && result.errorReason !== Reason.settlementPending) {
        // A refusal of ours (the failed-fee budget, no signer) after
        // something was sent (a sponsored funding) is nobody's doing but
        // the service's: it cools no payer and counts on no account's limit.
        const ours = SERVICE_REFUSALS.has(result.errorReason ?? "");
        await settlement.attributeFailure((transaction) =>
          ours ? Promise.resolve("service") : engine.failureCause(ctx.payment, transaction),
        );
      }
      const written = await settlement.finish(result);
      if (!result.success || written.successAnswered) return result;
      if (!written.recorded) {
        return settlePending(
          result.transaction,
          result.network,
          "the payment was sent but its outcome could not be recorded yet; retry the same payment to collect it",
          result.payer,
        );
      }
      return settleRefusal(
        {
          reason: Reason.duplicateSettlement,
          message: "this payment's success was already answered to another request",
          payer: result.payer,
        },
        result.network,
      );
    },
  };
}
