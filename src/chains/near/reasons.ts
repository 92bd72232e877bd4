/**
 * The NEAR family's own reasons for refusing a payment, one catalogue (the
 * README's table of payment reasons lists every one; a test checks it).
 */
export const NearReason = {
  payload: "invalid_exact_near_payload",
  keyType: "invalid_exact_near_key_type",
  signature: "invalid_exact_near_signature",
  actions: "invalid_exact_near_actions",
  method: "invalid_exact_near_method",
  asset: "invalid_exact_near_asset",
  recipient: "invalid_exact_near_recipient",
  amount: "invalid_exact_near_amount",
  deposit: "invalid_exact_near_deposit",
  gas: "invalid_exact_near_gas",
  relayerIsPayer: "invalid_exact_near_relayer_is_payer",
  expired: "invalid_exact_near_expired",
  maxBlockHeight: "invalid_exact_near_max_block_height",
  nonce: "invalid_exact_near_nonce",
  accessKey: "invalid_exact_near_access_key",
  accountNotFound: "invalid_exact_near_account_not_found",
  recipientNotRegistered: "invalid_exact_near_recipient_not_registered",
  transactionFailed: "invalid_exact_near_transaction_failed",
} as const;
