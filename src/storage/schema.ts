/**
 * Row types of every table, as Kysely sees them. Kept in step with
 * `migrations/*.sql` by hand; the storage tests exercise every column.
 */
import type { ColumnType, Generated, Insertable, Selectable } from "kysely";

type Timestamp = ColumnType<Date, Date | string, Date | string>;
type CreatedAt = ColumnType<Date, Date | string | undefined, never>;

export interface AccountsTable {
  id: string;
  name: string;
  plan: Generated<string>;
  created_at: CreatedAt;
}

export interface ApiKeysTable {
  id: string;
  account_id: string;
  name: string;
  key_hash: Uint8Array;
  prefix: string;
  created_at: CreatedAt;
  last_used_at: Timestamp | null;
  revoked_at: Timestamp | null;
}

export type SettlementStatus = "pending" | "succeeded" | "failed";

export interface SettlementsTable {
  id: string;
  account_id: string;
  api_key_id: string;
  network: string;
  scheme: string;
  payer: string | null;
  pay_to: string;
  asset: string;
  /** numeric(78,0): atomic units, always read back as a decimal string. */
  amount: ColumnType<string, string, string>;
  payload_fingerprint: string;
  status: SettlementStatus;
  transaction: string | null;
  error_reason: string | null;
  error_message: string | null;
  started_at: Timestamp;
  finished_at: Timestamp | null;
  duration_ms: number | null;
}

export interface Database {
  accounts: AccountsTable;
  api_keys: ApiKeysTable;
  settlements: SettlementsTable;
}

export type Account = Selectable<AccountsTable>;
export type ApiKeyRow = Selectable<ApiKeysTable>;
export type SettlementRow = Selectable<SettlementsTable>;
export type NewSettlement = Insertable<SettlementsTable>;
