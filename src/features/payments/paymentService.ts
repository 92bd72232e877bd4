/**
 * The service behaviour behind /verify and /settle, without HTTP: what a
 * call does beyond the protocol engine (recording, and later quotas,
 * idempotency and webhooks, which hook in here).
 */
import type { SettleResponse, VerifyResponse } from "@x402/core/types";
import type { PaymentFacilitator, PaymentRequest } from "../../facilitator/paymentFacilitator.js";
import type { ApiKeyPrincipal } from "../keys/authenticator.js";
import type { SettlementRecorder } from "../settlements/settlementRecorder.js";
import type { Cataloger, CatalogTrigger } from "../catalog/cataloger.js";

/**
 * Extension outcomes for the EXTENSION-RESPONSES header, keyed by extension
 * (`bazaar`). The caller passes an object; the service fills it in.
 */
export type ExtensionResponses = Record<string, unknown>;

export class PaymentService {
  constructor(
    private readonly facilitator: PaymentFacilitator,
    private readonly recorder: SettlementRecorder,
    private readonly catalog?: Cataloger,
  ) {}

  async verify(
    principal: ApiKeyPrincipal,
    request: PaymentRequest,
    extensionResponses: ExtensionResponses = {},
  ): Promise<VerifyResponse> {
    this.facilitator.assertWellFormed(request);
    const result = await this.facilitator.verify(request);
    await this.catalogOutcome("verify", result.isValid, principal, request, extensionResponses);
    return result;
  }

  async settle(
    principal: ApiKeyPrincipal,
    request: PaymentRequest,
    extensionResponses: ExtensionResponses = {},
  ): Promise<SettleResponse> {
    this.facilitator.assertWellFormed(request);
    const startedAt = Date.now();
    const id = await this.recorder.begin({ principal, request });
    const result = await this.facilitator.settle(request, id);
    await this.recorder.finish(id, result, startedAt);
    await this.catalogOutcome("settle", result.success, principal, request, extensionResponses);
    return result;
  }

  /** Bazaar cataloging: only behind a valid payment; never throws. */
  private async catalogOutcome(
    trigger: CatalogTrigger,
    paid: boolean,
    principal: ApiKeyPrincipal,
    request: PaymentRequest,
    out: ExtensionResponses,
  ): Promise<void> {
    if (!this.catalog) return;
    const { paymentPayload, paymentRequirements } = request;
    const outcome = paid
      ? await this.catalog.record(trigger, principal.accountId, paymentPayload, paymentRequirements)
      : this.catalog.declined(trigger, paymentPayload);
    if (outcome) out["bazaar"] = outcome;
  }
}
