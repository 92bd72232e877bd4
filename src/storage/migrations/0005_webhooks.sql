-- Signed webhooks (settlement.succeeded / settlement.failed).
--
-- webhook_endpoints: one endpoint URL and signing secret per account. The
-- secret is kept in the clear because every delivery is signed with it.
-- webhook_events: the transactional outbox. A row is written in the same
-- transaction that finishes its settlement, and only for an account that has
-- an endpoint. `seq` orders an account's events; a worker delivers only the
-- oldest undelivered event of an account.
-- webhook_deliveries: one row per delivery attempt.

CREATE TABLE webhook_endpoints (
  account_id  uuid PRIMARY KEY REFERENCES accounts (id),
  url         text NOT NULL,
  secret      text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE webhook_events (
  id               text PRIMARY KEY,
  seq              bigserial NOT NULL UNIQUE,
  account_id       uuid NOT NULL REFERENCES accounts (id),
  type             text NOT NULL,
  settlement_id    uuid NOT NULL REFERENCES settlements (id),
  payload          text NOT NULL,
  status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts         integer NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz NOT NULL DEFAULT now(),
  locked_until     timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  finished_at      timestamptz
);

CREATE INDEX webhook_events_pending_idx ON webhook_events (account_id, seq) WHERE status = 'pending';

CREATE TABLE webhook_deliveries (
  id             bigserial PRIMARY KEY,
  event_id       text NOT NULL REFERENCES webhook_events (id),
  account_id     uuid NOT NULL REFERENCES accounts (id),
  attempt        integer NOT NULL,
  url            text NOT NULL,
  status_code    integer,
  latency_ms     integer NOT NULL,
  error          text,
  next_retry_at  timestamptz,
  created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX webhook_deliveries_account_idx ON webhook_deliveries (account_id, id DESC);
