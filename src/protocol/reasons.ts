/**
 * Machine-readable reasons for `isValid: false` and `success: false` that
 * belong to the protocol rather than to one chain family, spelled as the
 * x402 v2 specification spells them. A family's own reasons live in its
 * folder (`src/chains/<family>/`), and the official mechanisms' reasons
 * pass through as they are.
 */
export const Reason = {
  invalidX402Version: "invalid_x402_version",
  unsupportedScheme: "unsupported_scheme",
  invalidNetwork: "invalid_network",
  invalidPayload: "invalid_payload",
  invalidPaymentRequirements: "invalid_payment_requirements",
  insufficientFunds: "insufficient_funds",
  unsupportedAsset: "unsupported_asset",
  unexpectedVerifyError: "unexpected_verify_error",
  unexpectedSettleError: "unexpected_settle_error",
  settlementPending: "settlement_pending",
  gasPriceTooHigh: "gas_price_too_high",
  noSignerAvailable: "no_signer_available",
  settlementInterrupted: "settlement_interrupted",
  /**
   * A payment this request may not be answered paid for: a copy of one that
   * is settling or settled for another request, or through another account.
   */
  duplicateSettlement: "duplicate_settlement",
  /**
   * The payer's own payment failed on-chain recently (its wallet's code, or
   * its own move of the funds or the nonce): refused on every account for
   * `PAYER_FAILURE_COOLING_SECONDS`, before anything is sent.
   */
  payerFailedOnchainRecently: "payer_failed_onchain_recently",
  /**
   * Too many settles of one payer's payments wait behind the one in flight
   * (each waits for the one before it to finish), or one waited too long:
   * nothing sent, retry later.
   */
  payerSettlementInFlight: "payer_settlement_in_flight",
  /**
   * The service's hourly budget of gas for settlements that fail on-chain
   * is spent on this network: retry after the time the answer names.
   */
  failedSettlementGasBudgetSpent: "failed_settlement_gas_budget_spent",
} as const;
