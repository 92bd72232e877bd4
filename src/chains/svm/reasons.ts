/**
 * The Solana family's own reasons for refusing a payment, beside the official
 * `@x402/svm` mechanism's (which pass through as they are). The README's
 * table of payment reasons lists every one; a test checks it.
 */
export const SvmReason = {
  /** `payTo` has no token account for the asset, and the payment would not create one. */
  payToTokenAccountMissing: "invalid_exact_svm_pay_to_token_account_missing",
  /** Found by the reconciler: the settlement's transaction failed on-chain. */
  transactionFailed: "invalid_exact_svm_transaction_failed",
} as const;
