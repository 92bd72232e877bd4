/**
 * Stage: `payment-identifier` idempotency. A replay answers the stored
 * response verbatim; a conflict is 409; a first use runs the rest.
 */
import {
  readPaymentIdentifier,
  type PaymentIdentifierStore,
} from "../../idempotency/paymentIdentifiers.js";
import { paymentFingerprint } from "../../settlements/settlementRecorder.js";
import type { SettleStage } from "./pipeline.js";

export function idempotencyStage(store: PaymentIdentifierStore): SettleStage {
  return {
    name: "idempotency",
    run(ctx, next) {
      const id = readPaymentIdentifier(ctx.request.paymentPayload);
      if (id === null) return next();
      return store.settleOnce(ctx.principal.keyId, id, paymentFingerprint(ctx.request), next);
    },
  };
}
