-- Durable settlement: every transaction is journaled before it is broadcast,
-- and the intent row keeps the request so a crashed settlement can be
-- reconciled against the chain.

ALTER TABLE settlements ADD COLUMN request jsonb;

-- One row per signed transaction (a fee bump adds one that `replaces` the
-- previous hash). `raw` is the signed transaction, re-sendable as is.
CREATE TABLE settlement_transactions (
  hash           text PRIMARY KEY,
  settlement_id  uuid REFERENCES settlements (id),
  network        text NOT NULL,
  signer         text NOT NULL,
  nonce          bigint NOT NULL,
  raw            text NOT NULL,
  replaces       text,
  status         text NOT NULL DEFAULT 'sent' CHECK (status IN ('sent', 'success', 'reverted')),
  block_number   bigint,
  created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX settlement_transactions_settlement_idx ON settlement_transactions (settlement_id);

-- @x402/evm's PendingSettlementStore: a broadcast-but-unconfirmed hash per
-- payload, shared by every replica so a retry reconciles wherever it lands.
CREATE TABLE pending_settlements (
  key         text PRIMARY KEY,
  tx_hash     text NOT NULL,
  expires_at  timestamptz NOT NULL
);
