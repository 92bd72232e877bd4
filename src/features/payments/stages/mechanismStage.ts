/**
 * Stage: the mechanism. The engine re-verifies and sends; its outcome comes
 * back as the settle response. When the chain could not be asked, or the
 * journal's database failed, before anything was sent, the row says
 * `not_attempted` and the caller gets 503: an outage is never recorded or
 * answered as the payer's failure.
 */
import { ChainUnavailableError, NothingSentError } from "../../../chains/ports.js";
import { ServiceError } from "../../../lib/errors.js";
import type { PaymentEngine } from "../engine.js";
import type { SettlementStage } from "./pipeline.js";

export function mechanismStage(engine: PaymentEngine): SettlementStage {
  return {
    name: "mechanism",
    async run({ settlement }) {
      try {
        return await engine.settle(settlement);
      } catch (e) {
        if (!(e instanceof ChainUnavailableError || e instanceof NothingSentError)) throw e;
        await settlement.notAttempted(e.message);
        throw new ServiceError("service_unavailable", `${e.message}; retry shortly`, {
          retryable: true,
          cause: e,
        });
      }
    },
  };
}
