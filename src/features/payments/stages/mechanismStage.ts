/**
 * Stage: the mechanism. The engine re-verifies and sends; its outcome comes
 * back as the settle response. When the chain could not be asked and nothing
 * was sent, the row says `not_attempted` and the caller gets 503: an outage
 * is never recorded or answered as the payer's failure. The same holds when
 * the database fails to journal the transaction: nothing was broadcast.
 */
import { ChainUnavailableError } from "../../../chains/ports.js";
import { ServiceError } from "../../../lib/errors.js";
import type { PaymentEngine } from "../engine.js";
import type { SettlementRecorder } from "../../settlements/settlementRecorder.js";
import type { SettleStage } from "./pipeline.js";

export function mechanismStage(engine: PaymentEngine, recorder: SettlementRecorder): SettleStage {
  return {
    name: "mechanism",
    async run(ctx) {
      const id = ctx.settlementId!;
      const unavailable = async (message: string, cause?: unknown) => {
        await recorder.notAttempted(id, message, ctx.startedAt, ctx.reservation);
        ctx.reservation = undefined;
        return new ServiceError("service_unavailable", `${message}; retry shortly`, {
          retryable: true,
          cause,
        });
      };
      let result;
      try {
        result = await engine.settle(ctx.request, id);
      } catch (e) {
        if (!(e instanceof ChainUnavailableError)) throw e;
        throw await unavailable(e.message, e);
      }
      // The mechanism turns a failed journal write into a payment failure;
      // it means the database failed before anything was broadcast.
      if (!result.success && !result.transaction && recorder.takeJournalFailure(id)) {
        throw await unavailable("the settlement could not be journaled, so nothing was sent");
      }
      return result;
    },
  };
}
