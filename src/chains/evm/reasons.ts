/**
 * The EVM family's own reasons, beside the official mechanisms' (which pass
 * through as they are), the approval sponsor's, and the one the service
 * renames. The README's table of payment reasons lists every one; a test
 * checks it.
 */
export const EvmReason = {
  eip712DomainMismatch: "invalid_exact_evm_eip712_domain_mismatch",
  nonceAlreadyUsed: "invalid_exact_evm_nonce_already_used",
  permit2InvalidNonce: "permit2_invalid_nonce",
  /** The settlement would need more gas than one may cost us (EVM_MAX_GAS_PER_TX). */
  gasLimitTooHigh: "gas_limit_too_high",
  /** Found by the reconciler: the settlement's transaction reverted. */
  transactionFailed: "invalid_exact_evm_transaction_failed",
  /** Mined without reverting, but without the token movement the payment promised. */
  transferMissing: "evm_settlement_transfer_missing",
} as const;

/**
 * Reasons for an approve we will not send. The first ten are the official
 * mechanisms' own strings (the same conditions, so the same words); the rest
 * name what only this service checks.
 */
export const ApprovalReason = {
  format: "invalid_erc20_approval_extension_format",
  from: "erc20_approval_from_mismatch",
  asset: "erc20_approval_asset_mismatch",
  spender: "erc20_approval_spender_not_permit2",
  parse: "erc20_approval_tx_parse_failed",
  target: "erc20_approval_tx_wrong_target",
  selector: "erc20_approval_tx_wrong_selector",
  txSpender: "erc20_approval_tx_wrong_spender",
  calldata: "erc20_approval_tx_invalid_calldata",
  signer: "erc20_approval_tx_signer_mismatch",
  /** The mechanisms turn an error carrying this into `erc20_approval_broadcast_failed`. */
  failed: "erc20_approval_tx_failed",
  chain: "erc20_approval_tx_wrong_chain",
  type: "erc20_approval_tx_unsupported_type",
  value: "erc20_approval_tx_sends_value",
  amount: "erc20_approval_amount_insufficient",
  gas: "erc20_approval_tx_gas_too_high",
  gasTooLow: "erc20_approval_tx_gas_too_low",
  /** Funding it would leave the payer more than 40% of the funding (approvalSponsor.ts). */
  overpriced: "erc20_approval_tx_overpriced",
  /** A payer with code (a contract, an EIP-7702 delegation) is never funded. */
  payerHasCode: "erc20_approval_payer_has_code",
  /** Funded once for a payment that did not settle: not again (sponsored_fundings). */
  alreadyFunded: "erc20_approval_payer_already_funded",
  /** The settling account's SPONSORED_FUNDINGS_PER_DAY is spent. */
  budgetSpent: "erc20_approval_funding_budget_spent",
  feeTooHigh: "erc20_approval_tx_fee_too_high",
  feeTooLow: "erc20_approval_tx_fee_too_low",
  nonce: "erc20_approval_tx_nonce_mismatch",
} as const;

/**
 * The mechanism reports an empty balance with its own code; the service
 * specification names the same condition `insufficient_funds`, which is
 * what resource servers already branch on.
 */
const RENAMED: Record<string, string> = {
  invalid_exact_evm_insufficient_balance: "insufficient_funds",
};

export function evmPublicReason(reason: string): string {
  return RENAMED[reason] ?? reason;
}
