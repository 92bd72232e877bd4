/**
 * The payment engine as the payment service needs it. Declared here, on the
 * service's side, so features depend on an interface they own and never on
 * the facilitator that implements it (the composition root wires the two).
 */
import type { SettleResponse, VerifyResponse } from "@x402/core/types";
import type {
  FailureCause,
  PendingSettlement,
  ReconcileOutcome,
  RoutedPayment,
} from "../../chains/ports.js";
import type { PaymentRequest } from "../../protocol/index.js";
import type { Settlement } from "../settlements/settlement.js";

export interface PaymentEngine {
  /** Reads a request once, routed to its family: the stages carry what it returns. */
  inspect(req: PaymentRequest): RoutedPayment;
  /** Throws `ChainUnavailableError` when the chain could not be asked. */
  verify(payment: RoutedPayment): Promise<VerifyResponse>;
  /**
   * Settles the settlement's payment in its scope. Throws
   * `ChainUnavailableError` when the chain could not be asked, and
   * `NothingSentError` when a store failed, both before anything was sent.
   */
  settle(settlement: Settlement): Promise<SettleResponse>;
  reconcile(pending: PendingSettlement): Promise<ReconcileOutcome>;
  /** Who caused a settlement of this payment that failed on-chain (see ChainFamily). */
  failureCause(payment: RoutedPayment, transaction: string): Promise<FailureCause>;
}
