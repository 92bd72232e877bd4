-- The spine: accounts, their API keys, and every settle attempt.
-- Statements are separated by a semicolon at the end of a line.

CREATE TABLE accounts (
  id          uuid PRIMARY KEY,
  name        text NOT NULL,
  plan        text NOT NULL DEFAULT 'free',
  created_at  timestamptz NOT NULL DEFAULT now()
);

-- Keys are stored only as a SHA-256 hash. `prefix` is the masked, displayable
-- start of the key. A deleted key keeps its row (revoked_at set) so that old
-- settlements stay attributed to it.
CREATE TABLE api_keys (
  id            uuid PRIMARY KEY,
  account_id    uuid NOT NULL REFERENCES accounts (id),
  name          text NOT NULL,
  key_hash      bytea NOT NULL UNIQUE,
  prefix        text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  last_used_at  timestamptz,
  revoked_at    timestamptz
);

CREATE INDEX api_keys_account_idx ON api_keys (account_id);

-- One row per settle attempt, written as `pending` before anything is sent
-- and finished with the outcome before the response leaves.
CREATE TABLE settlements (
  id                   uuid PRIMARY KEY,
  account_id           uuid NOT NULL REFERENCES accounts (id),
  api_key_id           uuid NOT NULL REFERENCES api_keys (id),
  network              text NOT NULL,
  scheme               text NOT NULL,
  payer                text,
  pay_to               text NOT NULL,
  asset                text NOT NULL,
  amount               numeric(78, 0) NOT NULL,
  payload_fingerprint  text NOT NULL,
  status               text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
  transaction          text,
  error_reason         text,
  error_message        text,
  started_at           timestamptz NOT NULL,
  finished_at          timestamptz,
  duration_ms          integer
);

CREATE INDEX settlements_account_started_idx ON settlements (account_id, started_at DESC);

CREATE INDEX settlements_fingerprint_idx ON settlements (payload_fingerprint);

CREATE INDEX settlements_pending_idx ON settlements (status) WHERE status = 'pending';
