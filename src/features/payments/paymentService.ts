/**
 * The service behaviour behind /verify and /settle, without HTTP: what a
 * call does beyond the protocol engine (recording, and later quotas,
 * idempotency and webhooks, which hook in here).
 */
import type { SettleResponse, VerifyResponse } from "@x402/core/types";
import type { PaymentFacilitator, PaymentRequest } from "../../facilitator/paymentFacilitator.js";
import type { ApiKeyPrincipal } from "../keys/authenticator.js";
import type { SettlementRecorder } from "../settlements/settlementRecorder.js";

export class PaymentService {
  constructor(
    private readonly facilitator: PaymentFacilitator,
    private readonly recorder: SettlementRecorder,
  ) {}

  verify(_principal: ApiKeyPrincipal, request: PaymentRequest): Promise<VerifyResponse> {
    this.facilitator.assertWellFormed(request);
    return this.facilitator.verify(request);
  }

  async settle(principal: ApiKeyPrincipal, request: PaymentRequest): Promise<SettleResponse> {
    this.facilitator.assertWellFormed(request);
    const startedAt = Date.now();
    const id = await this.recorder.begin({ principal, request });
    const result = await this.facilitator.settle(request, id);
    await this.recorder.finish(id, result, startedAt);
    return result;
  }
}
