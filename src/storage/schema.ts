/**
 * Row types of every table, as Kysely sees them. Kept in step with
 * `migrations/*.sql` by hand; the storage tests exercise every column.
 */
import type { ColumnType, Generated, Insertable, Selectable } from "kysely";

type Timestamp = ColumnType<Date, Date | string, Date | string>;
type CreatedAt = ColumnType<Date, Date | string | undefined, never>;

interface AccountsTable {
  id: string;
  name: string;
  plan: Generated<string>;
  created_at: CreatedAt;
  /** 0004: a suspended account cannot settle (402 account_suspended). */
  suspended_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  /** 0014: the operator's reason for the suspension, shown to the account. */
  suspended_reason: ColumnType<string | null, string | null | undefined, string | null>;
  /** 0030: the end of the plan's paid period (null: it does not run out). */
  paid_until: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  /** 0030: the plan taken at paid_until (null: free). */
  next_plan: ColumnType<string | null, string | null | undefined, string | null>;
  /** 0030: the paid days next_plan brings (null: unpaid). */
  next_plan_days: ColumnType<number | null, number | null | undefined, number | null>;
  /** 0030: pay-as-you-go's prepaid balance in micro-USD; bigint, read back as a string. */
  balance_micro_usd: ColumnType<
    string,
    string | number | bigint | undefined,
    string | number | bigint
  >;
  /** 0030: 'billing' when the balance suspended the account; otherwise the operator did. */
  suspended_by: ColumnType<string | null, string | null | undefined, string | null>;
  /** 0030: the paid_until whose "expiring" notice was written. */
  expiry_notice_for: ColumnType<
    Date | null,
    Date | string | null | undefined,
    Date | string | null
  >;
}

interface ApiKeysTable {
  id: string;
  account_id: string;
  name: string;
  key_hash: Uint8Array;
  prefix: string;
  created_at: CreatedAt;
  last_used_at: Timestamp | null;
  revoked_at: Timestamp | null;
}

export type SettlementStatus = "pending" | "succeeded" | "failed" | "not_attempted";

interface SettlementsTable {
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
  /** The verify/settle request, kept so an interrupted settlement can be reconciled. */
  request: ColumnType<unknown, string | null, string | null> | null;
  /** Quota units if it succeeds: vouchers for a batch-settlement claim (see plans.ts). */
  units: ColumnType<number, number | undefined, number>;
  /** 0008: the signed authorization this row settles; one live row per key. */
  authorization_key: string | null;
  /** 0008: settle requests answered by this row (the first and its duplicates). */
  attempts: ColumnType<number, number | undefined, number>;
  /** 0008: whether the row's units were added to the quota. */
  billed: ColumnType<boolean, boolean | undefined, boolean>;
  /** 0018: when the payment's one `success: true` was answered (null: not yet). */
  success_answered_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** 0018: the request id that got that answer. */
  success_request_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** 0018: the amount the success named, when the mechanism said it. */
  settled_amount: ColumnType<string | null, string | null | undefined, string | null>;
  /**
   * 0031: who an on-chain failure is charged to (null: not told apart, the
   * account); 0037: `service`, a refusal of ours after something was sent.
   */
  failure_cause: ColumnType<
    "payer" | "requirements" | "service" | null,
    "payer" | "requirements" | "service" | null | undefined,
    "payer" | "requirements" | "service" | null
  >;
}

interface ChainIdentitiesTable {
  network: string;
  genesis: string;
  since: Timestamp;
}

interface SettlementTransactionsTable {
  /** 0009: the chain's own id of the transaction (hash or signature). */
  reference: string;
  settlement_id: string | null;
  network: string;
  signer: string | null;
  replaces: string | null;
  /** 0009: what the family needs to follow or re-send it (EVM: nonce, raw). */
  detail: ColumnType<Record<string, unknown>, string, string>;
  status: ColumnType<
    "sent" | "success" | "reverted",
    "sent" | "success" | "reverted" | undefined,
    "sent" | "success" | "reverted"
  >;
  block_number: ColumnType<string | null, never, string | number | bigint | null>;
  /** 0019: what it cost the sending account, in the chain's smallest native unit. */
  fee: ColumnType<string | null, never, string | null>;
  /** 0034: what it could cost the sending account at most if it failed. */
  worst_fee: ColumnType<string | null, string | null | undefined, string | null>;
  /** 0038: who caused its on-chain failure, as the family read it from the chain. */
  failure_cause: ColumnType<
    "payer" | "requirements" | "service" | null,
    never,
    "payer" | "requirements" | "service" | null
  >;
  created_at: CreatedAt;
}

interface PendingSettlementsTable {
  key: string;
  tx_hash: string;
  expires_at: Timestamp;
}

/** The discovery catalog (0003_catalog.sql); written only by features/catalog. */
interface CatalogResourcesTable {
  id: ColumnType<string, never, never>;
  resource: string;
  /** MCP tool name; '' for HTTP resources. */
  tool_name: string;
  type: "http" | "mcp";
  x402_version: number;
  method: string | null;
  description: string | null;
  mime_type: string | null;
  service_name: string | null;
  tags: string[];
  icon_url: string | null;
  /** jsonb: PaymentRequirements[]; written as JSON text. */
  accepts: ColumnType<unknown, string, string>;
  accept_keys: ColumnType<unknown, never, never>;
  extension_keys: string[];
  /** jsonb: the validated declaration echoed as `extensions.bazaar`. */
  bazaar: ColumnType<unknown, string, string>;
  search_vector: ColumnType<string, never, never>;
  account_id: string | null;
  cataloged_at: CreatedAt;
  last_updated: Timestamp;
  /** 0036: unproven, proven or stale (docs/discovery.md); stale entries are not listed. */
  state: ColumnType<CatalogEntryState, CatalogEntryState | undefined, CatalogEntryState>;
  /** 0036: how the owner proved it (null: not proven). */
  proof: CatalogProof | null;
  proven_at: Timestamp | null;
  /** 0036: the URL the proof checker fetches (null: the resource URL). */
  probe_url: string | null;
  /** 0036: when the resource last answered 402 to the checker. */
  last_402_at: Timestamp | null;
  last_check_at: Timestamp | null;
  last_check_error: string | null;
  next_check_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

export type CatalogEntryState = "unproven" | "proven" | "stale";
export type CatalogProof = "pay_to" | "challenge";

/** 0036: another account's declaration of an entry it does not hold, until checked. */
interface CatalogClaimsTable {
  resource: string;
  tool_name: string;
  account_id: string;
  /** jsonb: the entry as the claiming account declared it. */
  draft: ColumnType<unknown, string, string>;
  probe_url: string | null;
  claimed_at: CreatedAt;
  declared_at: ColumnType<Date, Date | string | undefined, Date | string>;
  last_check_at: Timestamp | null;
  result: ColumnType<
    "pending" | "not_proven" | "owner_holds",
    "pending" | "not_proven" | "owner_holds" | undefined,
    "pending" | "not_proven" | "owner_holds"
  >;
}

/** 0036: what happened to catalog entries, shown to the accounts involved. */
interface CatalogEventsTable {
  id: ColumnType<string, never, never>;
  resource: string;
  tool_name: string;
  kind: "proven" | "unproven" | "takeover" | "stale" | "listed_again";
  account_id: string | null;
  previous_account_id: string | null;
  detail: ColumnType<unknown, string | undefined, string>;
  at: CreatedAt;
}

/** 0036: the token an account publishes at /.well-known/x402-catalog. */
interface CatalogChallengesTable {
  account_id: string;
  token: string;
  created_at: CreatedAt;
}

interface FacilitatorReplicasTable {
  holder: string;
  expires_at: Timestamp;
}

interface SignerLeasesTable {
  network: string;
  address: string;
  holder: string;
  expires_at: Timestamp;
}

/** Signed webhooks (0005_webhooks.sql); written only by features/webhooks and the settlement writers. */
interface WebhookEndpointsTable {
  account_id: string;
  url: string;
  secret: string;
  /** 0013: the event types this endpoint receives. */
  events: ColumnType<string[], string[] | undefined, string[]>;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

type WebhookEventStatus = "pending" | "delivered" | "failed";

interface WebhookEventsTable {
  id: string;
  seq: ColumnType<string, never, never>;
  account_id: string;
  type: string;
  /** 0013: null for a test delivery. */
  settlement_id: string | null;
  /** The exact JSON body that is signed and sent. */
  payload: string;
  status: ColumnType<WebhookEventStatus, WebhookEventStatus | undefined, WebhookEventStatus>;
  attempts: ColumnType<number, number | undefined, number>;
  next_attempt_at: ColumnType<Date, Date | string | undefined, Date | string>;
  locked_until: Timestamp | null;
  created_at: CreatedAt;
  finished_at: Timestamp | null;
}

interface WebhookDeliveriesTable {
  id: ColumnType<string, never, never>;
  event_id: string;
  account_id: string;
  attempt: number;
  url: string;
  status_code: number | null;
  latency_ms: number;
  error: string | null;
  next_retry_at: Timestamp | null;
  created_at: CreatedAt;
}

/** Plans and idempotency (0004_plans_idempotency.sql); written only by features/plans and features/idempotency. */
interface QuotaUsageTable {
  account_id: string;
  /** Calendar month in UTC, 'YYYY-MM'. */
  month: string;
  used: ColumnType<number, number | undefined, number>;
  reserved: ColumnType<number, number | undefined, number>;
  updated_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

interface UsageChargesTable {
  id: string;
  account_id: string;
  month: string;
  settlement_id: string | null;
  units: number;
  /** bigint: read back as a decimal string. */
  amount_micro_usd: ColumnType<string, string | number | bigint, string | number | bigint>;
  created_at: CreatedAt;
}

/** Billing payments (0030_billing.sql); written only by features/billing. */
export interface BillingPaymentsTable {
  id: string;
  account_id: string;
  kind: "plan" | "top_up" | "comp";
  plan: string | null;
  /** bigint: read back as a decimal string. */
  amount_micro_usd: ColumnType<string, string | number | bigint, string | number | bigint>;
  status: "pending" | "paid" | "failed";
  source: "dashboard" | "api_key" | "operator";
  authorization_key: string | null;
  network: string | null;
  asset: string | null;
  pay_to: string | null;
  payer: string | null;
  transaction: string | null;
  settlement_id: string | null;
  period_start: Timestamp | null;
  period_end: Timestamp | null;
  note: string | null;
  error: string | null;
  created_at: CreatedAt;
  paid_at: Timestamp | null;
}

interface PaymentIdentifiersTable {
  api_key_id: string;
  id: string;
  fingerprint: string;
  status: "executing" | "bound";
  /** The settle response body, JSON, once bound. */
  response: string | null;
  claimed_at: ColumnType<Date, Date | string | undefined, Date | string>;
  bound_at: Timestamp | null;
}

/** Dashboard sign-in (0013_dashboard.sql); written only by features/identity. */
interface IdentitiesTable {
  issuer: string;
  subject: string;
  account_id: string;
  /** The configured provider id it signed in through (e.g. google, github). */
  provider: string;
  email: string | null;
  display_name: string | null;
  created_at: CreatedAt;
  last_sign_in_at: Timestamp | null;
}

interface DashboardSessionsTable {
  id: string;
  /** SHA-256 of the cookie's token; the token itself is never stored. */
  token_hash: Uint8Array;
  account_id: string;
  issuer: string;
  subject: string;
  csrf_token: string;
  created_at: CreatedAt;
  expires_at: Timestamp;
}

/** Confidential settlement (0015_confidential.sql); written only by features/confidential. */
export type OfferMode = "default" | "confidential" | "both";

interface ConfidentialMerchantsTable {
  account_id: string;
  /** Lowercase 0x address; permanent (a trigger refuses any change). */
  merchant_address: string;
  enablement_message: string;
  wallet_signature: string;
  /** numeric(78,0) as a decimal string; null while the slot is being assigned. */
  slot: string | null;
  slot_secret: string | null;
  slot_tx_hash: string | null;
  /** Lowercase 0x address of the slot's viewer (null: none); permanent once written. */
  viewer_address: ColumnType<string | null, string | null | undefined, never>;
  mode: ColumnType<OfferMode, OfferMode | undefined, OfferMode>;
  created_at: CreatedAt;
  enabled_at: Timestamp | null;
}

interface ConfidentialCreditsTable {
  authorization_key: string;
  account_id: string;
  merchant_address: string;
  network: string;
  asset: string;
  payer: string;
  amount: string;
  payment_nonce: string;
  created_at: CreatedAt;
  receipt: ColumnType<unknown, string | null | undefined, string | null>;
  receipt_signature: string | null;
  settled_at: Timestamp | null;
  credited_day: number | null;
  batch_tx_hash: string | null;
  /** 0021: the vault's key of the payment (keccak256(payer, nonce)). */
  payment_key: string | null;
  /** 0021: the UTC day the vault collected it in. */
  day: number | null;
  /** 0021: credited another way: its receipt redeemed, or returned to its payer. */
  outcome: "redeemed" | "returned" | "bond_paid" | null;
  /** 0021: why its day's batch skipped it. */
  problem: string | null;
}

interface ConfidentialBatchesTable {
  day: number;
  status: "running" | "done";
  owner: string;
  lease_until: Timestamp;
  started_at: CreatedAt;
  finished_at: Timestamp | null;
  slots: number | null;
  credits: number | null;
  total_amount: string | null;
  plan: ColumnType<unknown, string | null | undefined, string | null>;
  tx_hashes: ColumnType<unknown, string | undefined, string>;
  /** 0021: the credits the batch skipped, and why. */
  skipped: ColumnType<unknown, string | undefined, string>;
  /** 0021: the vault's attempt of the day the batch closed. */
  attempt: number | null;
}

/** 0021: one replica at a time holds the vault's operator key. */
interface ConfidentialOperatorLeaseTable {
  id: number;
  holder: string | null;
  expires_at: Timestamp;
}

export type WithdrawalState = "submitting" | "debited" | "finalized" | "cancelled" | "failed";

interface ConfidentialWithdrawalsTable {
  id: string;
  account_id: string;
  amount: string;
  request: ColumnType<unknown, string, string>;
  signature: string;
  state: WithdrawalState;
  onchain_id: string | null;
  request_tx_hash: string | null;
  finalize_tx_hash: string | null;
  paid_amount: string | null;
  error: string | null;
  created_at: CreatedAt;
  updated_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

/** 0032: gas sent to a payer for its approve of Permit2 (erc20ApprovalGasSponsoring). */
interface SponsoredFundingsTable {
  id: Generated<string>;
  network: string;
  /** Lower case. */
  payer: string;
  settlement_id: string;
  account_id: string;
  wei: ColumnType<string, string, string>;
  settled: ColumnType<boolean, boolean | undefined, boolean>;
  funded_at: CreatedAt;
}

export interface Database {
  identities: IdentitiesTable;
  dashboard_sessions: DashboardSessionsTable;
  catalog_resources: CatalogResourcesTable;
  catalog_claims: CatalogClaimsTable;
  catalog_events: CatalogEventsTable;
  catalog_challenges: CatalogChallengesTable;
  accounts: AccountsTable;
  api_keys: ApiKeysTable;
  settlements: SettlementsTable;
  settlement_transactions: SettlementTransactionsTable;
  sponsored_fundings: SponsoredFundingsTable;
  pending_settlements: PendingSettlementsTable;
  chain_identities: ChainIdentitiesTable;
  facilitator_replicas: FacilitatorReplicasTable;
  signer_leases: SignerLeasesTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_events: WebhookEventsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  quota_usage: QuotaUsageTable;
  usage_charges: UsageChargesTable;
  billing_payments: BillingPaymentsTable;
  payment_identifiers: PaymentIdentifiersTable;
  confidential_merchants: ConfidentialMerchantsTable;
  confidential_credits: ConfidentialCreditsTable;
  confidential_batches: ConfidentialBatchesTable;
  confidential_withdrawals: ConfidentialWithdrawalsTable;
  confidential_operator_lease: ConfidentialOperatorLeaseTable;
}

export type Account = Selectable<AccountsTable>;
export type SettlementRow = Selectable<SettlementsTable>;
/** A settlement without its stored request: what an outcome write reads back. */
export type SettlementOutcomeRow = Omit<SettlementRow, "request">;
export type NewSettlement = Insertable<SettlementsTable>;
