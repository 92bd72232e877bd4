-- Plans, quotas and idempotent settle.
--
-- accounts.suspended_at: a suspended account (pay-as-you-go) cannot settle.
-- quota_usage: one row per account and calendar month (UTC, 'YYYY-MM').
-- A settle reserves its units first with a conditional UPDATE
-- (used + reserved + n <= limit), then commits them to `used` on success or
-- gives them back on failure, so parallel settles can never overshoot.
-- usage_charges: pay-as-you-go units beyond the free allowance, priced in
-- micro-USD (0.001 USD = 1000).
-- payment_identifiers: payment-identifier ids, unique per API key. A row is
-- `executing` while its settle runs and `bound` (with the response to
-- replay) after a success; a failure deletes it.

ALTER TABLE accounts ADD COLUMN suspended_at timestamptz;

CREATE TABLE quota_usage (
  account_id  uuid NOT NULL REFERENCES accounts (id),
  month       text NOT NULL,
  used        integer NOT NULL DEFAULT 0 CHECK (used >= 0),
  reserved    integer NOT NULL DEFAULT 0 CHECK (reserved >= 0),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, month)
);

CREATE TABLE usage_charges (
  id                uuid PRIMARY KEY,
  account_id        uuid NOT NULL REFERENCES accounts (id),
  month             text NOT NULL,
  settlement_id     uuid REFERENCES settlements (id),
  units             integer NOT NULL,
  amount_micro_usd  bigint NOT NULL,
  created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX usage_charges_account_idx ON usage_charges (account_id, month);

CREATE TABLE payment_identifiers (
  api_key_id   uuid NOT NULL REFERENCES api_keys (id),
  id           text NOT NULL,
  fingerprint  text NOT NULL,
  status       text NOT NULL CHECK (status IN ('executing', 'bound')),
  response     text,
  claimed_at   timestamptz NOT NULL DEFAULT now(),
  bound_at     timestamptz,
  PRIMARY KEY (api_key_id, id)
);
