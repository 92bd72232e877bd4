/**
 * The payment engine as the payment service needs it. Declared here, on the
 * service's side, so features depend on an interface they own and never on
 * the facilitator that implements it (the composition root wires the two).
 */
import type { SettleResponse, VerifyResponse } from "@x402/core/types";
import type { PendingSettlement, ReconcileOutcome } from "../../chains/ports.js";
import type { PaymentRequest } from "../../protocol.js";

export interface PaymentEngine {
  /** A message naming the first malformed field of the scheme payload, or undefined. */
  shapeError(req: PaymentRequest): string | undefined;
  payerOf(req: PaymentRequest): string | undefined;
  /** The key shared by every copy of the signed authorization. */
  authorizationKey(req: PaymentRequest): string;
  quotaUnits(req: PaymentRequest): number;
  /**
   * The reason a settle of an authorization already consumed (or reused by
   * another signed payment) gets: the family's own nonce reason where it
   * has one, as the chain would answer it.
   */
  replayReason(req: PaymentRequest): string;
  /** Throws `ChainUnavailableError` when the chain could not be asked. */
  verify(req: PaymentRequest): Promise<VerifyResponse>;
  /** Throws `ChainUnavailableError` when the chain could not be asked and nothing was sent. */
  settle(req: PaymentRequest, settlementId: string): Promise<SettleResponse>;
  reconcile(pending: PendingSettlement): Promise<ReconcileOutcome>;
}
