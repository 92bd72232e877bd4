/**
 * Machine-readable reasons for `isValid: false` and `success: false`.
 *
 * The EVM mechanism's own reasons (`invalid_exact_evm_*`) pass through as
 * they are; these are the protocol-level ones this service adds, spelled as
 * the x402 v2 specification spells them.
 */
export const Reason = {
  invalidX402Version: "invalid_x402_version",
  unsupportedScheme: "unsupported_scheme",
  invalidNetwork: "invalid_network",
  invalidPayload: "invalid_payload",
  invalidPaymentRequirements: "invalid_payment_requirements",
  insufficientFunds: "insufficient_funds",
  unsupportedAsset: "unsupported_asset",
  eip712DomainMismatch: "invalid_exact_evm_eip712_domain_mismatch",
  unexpectedVerifyError: "unexpected_verify_error",
  unexpectedSettleError: "unexpected_settle_error",
  settlementPending: "settlement_pending",
  gasPriceTooHigh: "gas_price_too_high",
  noSignerAvailable: "no_signer_available",
  settlementInterrupted: "settlement_interrupted",
  /** The same signed payment was already submitted through another account. */
  duplicateSettlement: "duplicate_settlement",
} as const;

/**
 * The EVM mechanism reports an empty balance with its own code; the service
 * specification names the same condition `insufficient_funds`, which is what
 * resource servers already branch on.
 */
const RENAMED: Record<string, string> = {
  invalid_exact_evm_insufficient_balance: Reason.insufficientFunds,
};

export function publicReason(reason: string): string {
  return RENAMED[reason] ?? reason;
}
