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
import { paymentFingerprint } from "../settlements/settlementRecorder.js";
import { settlementUnits } from "../plans/plans.js";
import type { QuotaLedger, QuotaReservation } from "../plans/quotaLedger.js";
import {
  readPaymentIdentifier,
  type PaymentIdentifierStore,
} from "../idempotency/paymentIdentifiers.js";

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
    /** Plans and quotas; absent = settlements are not metered. */
    private readonly quota?: QuotaLedger,
    private readonly paymentIds?: PaymentIdentifierStore,
  ) {}

  async verify(
    principal: ApiKeyPrincipal,
    request: PaymentRequest,
    extensionResponses: ExtensionResponses = {},
  ): Promise<VerifyResponse> {
    this.facilitator.assertWellFormed(request);
    readPaymentIdentifier(request.paymentPayload); // 400 when malformed; verify never claims it
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
    // DESIGN "A settle, step by step": idempotency claim, quota reserve,
    // record and settle, quota commit/release, idempotency bind/release.
    const paymentId = readPaymentIdentifier(request.paymentPayload);
    const run = () => this.settleMetered(principal, request, extensionResponses);
    if (paymentId === null || !this.paymentIds) return run();
    return this.paymentIds.settleOnce(principal.keyId, paymentId, paymentFingerprint(request), run);
  }

  private async settleMetered(
    principal: ApiKeyPrincipal,
    request: PaymentRequest,
    extensionResponses: ExtensionResponses,
  ): Promise<SettleResponse> {
    const units = this.quota ? settlementUnits(request) : 0;
    const reservation: QuotaReservation | undefined =
      units > 0 ? await this.quota!.reserve(principal.accountId, units) : undefined;
    let result: SettleResponse;
    let settlementId: string | null = null;
    try {
      const startedAt = Date.now();
      settlementId = await this.recorder.begin({ principal, request });
      result = await this.facilitator.settle(request, settlementId);
      await this.recorder.finish(settlementId, result, startedAt);
    } catch (e) {
      if (reservation) await this.quota!.settle(reservation, false, settlementId);
      throw e;
    }
    if (reservation) {
      // A pending settlement was broadcast and most likely lands: it counts.
      // A `settlement_pending` answer is not counted: the client's retry of
      // the same payment reconciles against the same transaction and is
      // counted once when it succeeds. Counting both would bill one payment twice.
      // A success that sent nothing (an `upto` settled at zero) moved no
      // money and is not billed either.
      const counts = result.success && result.transaction !== "";
      await this.quota!.settle(reservation, counts, settlementId);
    }
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
