/**
 * Stage: `payment-identifier` idempotency. A replay answers the stored
 * response verbatim; a conflict is 409; a first use runs the rest. "The same
 * payment" is the same signed payload asked to pay the same thing (network,
 * scheme, asset, amount, recipient): an id replayed with other requirements
 * is a conflict, not a copy of the first answer.
 */
import {
  readPaymentIdentifier,
  type PaymentIdentifierStore,
} from "../../idempotency/paymentIdentifiers.js";
import { requestFingerprint } from "../../settlements/fingerprints.js";
import type { SettleStage } from "./pipeline.js";

export function idempotencyStage(store: PaymentIdentifierStore): SettleStage {
  return {
    name: "idempotency",
    run(ctx, next) {
      const id = readPaymentIdentifier(ctx.request.paymentPayload);
      if (id === null) return next();
      return store.settleOnce(ctx.principal.keyId, id, requestFingerprint(ctx.request), next);
    },
  };
}
