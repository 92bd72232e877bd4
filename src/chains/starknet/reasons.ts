/**
 * The Starknet family's own reasons for refusing a payment, one catalogue
 * (the README's table of payment reasons lists every one; a test checks it).
 */
export const StarknetReason = {
  payload: "invalid_exact_starknet_payload",
  typedData: "invalid_exact_starknet_payload_typed_data",
  chainId: "invalid_exact_starknet_payload_chain_id",
  feePayer: "invalid_exact_starknet_fee_payer",
  caller: "invalid_exact_starknet_payload_caller",
  calls: "invalid_exact_starknet_payload_calls",
  asset: "invalid_exact_starknet_payload_asset_mismatch",
  recipient: "invalid_exact_starknet_payload_recipient_mismatch",
  amount: "invalid_exact_starknet_payload_amount_mismatch",
  executeAfter: "invalid_exact_starknet_payload_execute_after",
  expired: "invalid_exact_starknet_payload_expired",
  windowTooLong: "invalid_exact_starknet_payload_window_exceeds_max_timeout",
  accountNotDeployed: "invalid_exact_starknet_account_not_deployed",
  signature: "invalid_exact_starknet_payload_signature",
  nonceUsed: "invalid_exact_starknet_nonce_already_used",
  simulation: "invalid_exact_starknet_simulation_failed",
  reverted: "invalid_exact_starknet_transaction_reverted",
  transferMissing: "invalid_exact_starknet_transfer_missing",
  /** The settlement could cost more than one may (STARKNET_MAX_FEE_STRK). */
  feeTooHigh: "invalid_exact_starknet_fee_too_high",
} as const;
