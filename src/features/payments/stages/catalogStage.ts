/**
 * Stage: the bazaar catalog. A settled payment refreshes its resource's
 * entry; a refusal reports why nothing was cataloged. Never fails a settle.
 */
import type { Cataloger } from "../../catalog/cataloger.js";
import type { SettleStage } from "./pipeline.js";

export function catalogStage(catalog: Cataloger): SettleStage {
  return {
    name: "catalog",
    async run(ctx, next) {
      const result = await next();
      const { paymentPayload, paymentRequirements } = ctx.request;
      const outcome = result.success
        ? await catalog.record(
            "settle",
            ctx.principal.accountId,
            paymentPayload,
            paymentRequirements,
          )
        : catalog.declined("settle", paymentPayload);
      if (outcome) ctx.extensionResponses["bazaar"] = outcome;
      return result;
    },
  };
}
