/**
 * What confidential settlement needs from the privacy contract on its chain:
 * the chain side's own interface (`src/chains/evm/confidential/vault.ts`).
 * This feature only schedules, records and answers. Every chain write is
 * safe to repeat: the contract refuses a second slot for a merchant, a
 * second credit of a slot for a day and a second finalization, which is what
 * makes the daily batch and withdrawals exactly-once across retries,
 * replicas and crashes.
 */
export type {
  ConfidentialVault,
  DayCredit,
  SignedReceipt,
  WithdrawalInfo,
} from "../../chains/evm/confidential/vault.js";
export type { WithdrawRequest } from "../../chains/evm/confidential/messages.js";
