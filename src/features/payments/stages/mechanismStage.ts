/**
 * Stage: the mechanism. The engine re-verifies and sends; its outcome comes
 * back as the settle response. When the chain could not be asked, or the
 * journal's database failed, or the service's failed-fee budget for the
 * network is spent, before anything was sent, the row says `not_attempted`
 * and the caller gets 503 (with `Retry-After` for the budget): none of them
 * is ever recorded or answered as the payer's failure.
 */
import {
  ChainUnavailableError,
  FailedFeeBudgetSpentError,
  NothingSentError,
} from "../../../chains/ports.js";
import { Reason } from "../../../protocol/reasons.js";
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
        if (e instanceof FailedFeeBudgetSpentError) {
          await settlement.notAttempted(e.message);
          throw new ServiceError("service_unavailable", `${e.message}; nothing was sent`, {
            retryable: true,
            cause: e,
            details: {
              reason: Reason.failedSettlementGasBudgetSpent,
              network: e.network,
              retryAfterSeconds: e.retryAfterSeconds,
            },
          });
        }
        if (!(e instanceof ChainUnavailableError || e instanceof NothingSentError)) {
          // No outcome is written: what the chain said of what was sent is
          // journaled on its own, and the reconciler decides the row.
          await settlement.journalWithoutOutcome();
          throw e;
        }
        await settlement.notAttempted(e.message);
        throw new ServiceError("service_unavailable", `${e.message}; retry shortly`, {
          retryable: true,
          cause: e,
        });
      } finally {
        settlement.mechanismEnded();
      }
    },
  };
}
