-- The dashboard: who signs in, their sessions, and what the tabs read.
--
-- identities: an identity provider's user (issuer + subject) bound to one
-- account. The first sign-in of an unknown identity creates an account on
-- the free plan; an operator can bind (claim) an identity to an account the
-- command line created.
-- dashboard_sessions: a signed-in browser. Only a SHA-256 hash of the cookie's
-- random token is kept, so a database read does not yield a usable session;
-- every request reads the row, so deleting it signs out on every replica at
-- once. csrf_token is the value each state-changing call must echo in a header.
-- webhook_endpoints.events: the event types an endpoint receives.
-- webhook_events.settlement_id becomes optional: a test delivery has none.

CREATE TABLE identities (
  issuer           text NOT NULL,
  subject          text NOT NULL,
  account_id       uuid NOT NULL REFERENCES accounts (id),
  provider         text NOT NULL,
  email            text,
  display_name     text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  last_sign_in_at  timestamptz,
  PRIMARY KEY (issuer, subject)
);

CREATE INDEX identities_account_idx ON identities (account_id);

CREATE TABLE dashboard_sessions (
  id          uuid PRIMARY KEY,
  token_hash  bytea NOT NULL UNIQUE,
  account_id  uuid NOT NULL REFERENCES accounts (id),
  issuer      text NOT NULL,
  subject     text NOT NULL,
  csrf_token  text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL
);

CREATE INDEX dashboard_sessions_expiry_idx ON dashboard_sessions (expires_at);

ALTER TABLE webhook_endpoints ADD COLUMN events text[] NOT NULL DEFAULT ARRAY['settlement.succeeded', 'settlement.failed'];

ALTER TABLE webhook_events ALTER COLUMN settlement_id DROP NOT NULL;

-- Settlements tab: keyset pagination on (started_at, id) within an account,
-- and search by payer or transaction prefix, stay index scans at millions of rows.
CREATE INDEX settlements_account_page_idx ON settlements (account_id, started_at DESC, id DESC);

CREATE INDEX settlements_account_payer_idx ON settlements (account_id, lower(payer) text_pattern_ops);

CREATE INDEX settlements_account_transaction_idx ON settlements (account_id, lower(transaction) text_pattern_ops);
