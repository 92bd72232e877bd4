/**
 * What confidential settlement needs from the privacy contract: the
 * family-neutral port in `src/chains/confidentialPort.ts`, implemented by
 * the EVM side (`src/chains/evm/confidential/`).
 */
export type {
  ConfidentialReceipt,
  ConfidentialVault,
  WithdrawRequest,
} from "../../chains/confidentialPort.js";
