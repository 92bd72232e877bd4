-- Plans that are paid for, in x402 (features/billing).
--
-- accounts.paid_until: the end of the paid period of the account's plan; at
-- that instant the plan falls back to next_plan (Free when none). Null: the
-- plan does not run out (Free, pay-as-you-go, or an operator's open-ended comp).
-- accounts.next_plan / next_plan_days: a change chosen for the end of the
-- period (a downgrade takes effect then); next_plan_days is the paid period
-- that change brings (a lower paid plan paid in advance), null when unpaid.
-- accounts.balance_micro_usd: pay-as-you-go's prepaid USDC, in micro-USD
-- (USDC's own atomic unit); charges draw from it and may take it below zero
-- by the operator's grace, past which the account is suspended.
-- accounts.suspended_by: 'billing' when the balance suspended the account
-- (a top-up lifts it); anything else is the operator's, which only the
-- operator lifts.
-- accounts.expiry_notice_for: the paid_until whose "expiring" notice was
-- written, so every replica's sweep writes it once.
ALTER TABLE accounts ADD COLUMN paid_until timestamptz;

ALTER TABLE accounts ADD COLUMN next_plan text;

ALTER TABLE accounts ADD COLUMN next_plan_days integer;

ALTER TABLE accounts ADD COLUMN balance_micro_usd bigint NOT NULL DEFAULT 0;

ALTER TABLE accounts ADD COLUMN suspended_by text;

ALTER TABLE accounts ADD COLUMN expiry_notice_for timestamptz;

-- One row per billing payment: written `pending` before the payment is
-- settled (so a payment that lands is never unknown), then `paid` in the
-- transaction that changes the plan or the balance, or `failed` when nothing
-- moved. authorization_key is the signed payment's (the settlement's), so a
-- payment is applied once whoever presents it again. An operator's comp is a
-- row of kind 'comp', paid at 0, without a payment.
CREATE TABLE billing_payments (
  id                 uuid PRIMARY KEY,
  account_id         uuid NOT NULL REFERENCES accounts (id),
  kind               text NOT NULL CHECK (kind IN ('plan', 'top_up', 'comp')),
  plan               text,
  amount_micro_usd   bigint NOT NULL CHECK (amount_micro_usd >= 0),
  status             text NOT NULL CHECK (status IN ('pending', 'paid', 'failed')),
  source             text NOT NULL CHECK (source IN ('dashboard', 'api_key', 'operator')),
  authorization_key  text UNIQUE,
  network            text,
  asset              text,
  pay_to             text,
  payer              text,
  transaction        text,
  settlement_id      uuid REFERENCES settlements (id),
  period_start       timestamptz,
  period_end         timestamptz,
  note               text,
  error              text,
  created_at         timestamptz NOT NULL DEFAULT now(),
  paid_at            timestamptz
);

CREATE INDEX billing_payments_account_idx ON billing_payments (account_id, created_at DESC);

CREATE INDEX billing_payments_pending_idx ON billing_payments (created_at) WHERE status = 'pending';

-- The sweep finds plans that run out, and those due an "expiring" notice.
CREATE INDEX accounts_paid_until_idx ON accounts (paid_until) WHERE paid_until IS NOT NULL;
