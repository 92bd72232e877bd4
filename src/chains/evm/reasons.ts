/**
 * The EVM family's own reasons, beside the official mechanisms' (which pass
 * through as they are), and the one the service renames.
 */
export const EvmReason = {
  eip712DomainMismatch: "invalid_exact_evm_eip712_domain_mismatch",
  nonceAlreadyUsed: "invalid_exact_evm_nonce_already_used",
  permit2InvalidNonce: "permit2_invalid_nonce",
  /** The settlement would need more gas than one may cost us (EVM_MAX_GAS_PER_TX). */
  gasLimitTooHigh: "gas_limit_too_high",
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
