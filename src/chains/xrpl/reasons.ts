/**
 * The XRP Ledger family's own reasons for refusing a payment, one catalogue
 * (the README's table of payment reasons lists every one; a test checks it).
 */
export const XrplReason = {
  payload: "invalid_exact_xrpl_payload",
  transactionType: "invalid_exact_xrpl_transaction_type",
  signingKey: "invalid_exact_xrpl_signing_key",
  signature: "invalid_exact_xrpl_signature",
  signerNotAuthorized: "invalid_exact_xrpl_signer_not_authorized",
  destination: "invalid_exact_xrpl_destination",
  destinationTag: "invalid_exact_xrpl_destination_tag",
  amount: "invalid_exact_xrpl_amount",
  asset: "invalid_exact_xrpl_asset",
  partialPayment: "invalid_exact_xrpl_partial_payment",
  multisigned: "invalid_exact_xrpl_multisigned",
  delegate: "invalid_exact_xrpl_delegate",
  networkId: "invalid_exact_xrpl_network_id",
  feeTooHigh: "invalid_exact_xrpl_fee_too_high",
  lastLedger: "invalid_exact_xrpl_last_ledger_sequence",
  expired: "invalid_exact_xrpl_expired",
  sequence: "invalid_exact_xrpl_sequence",
  invoice: "invalid_exact_xrpl_invoice",
  accountNotFound: "invalid_exact_xrpl_account_not_found",
  destinationNotFound: "invalid_exact_xrpl_destination_not_found",
  noTrustLine: "invalid_exact_xrpl_no_trust_line",
  simulationFailed: "invalid_exact_xrpl_simulation_failed",
  transactionFailed: "invalid_exact_xrpl_transaction_failed",
  requirements: "invalid_payment_requirements",
} as const;
