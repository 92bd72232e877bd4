-- Confidential settlement (spec 3.3-3.5, 4.6): a merchant's permanent
-- withdrawal wallet and encrypted slot, the credit each confidential payment
-- owes, the daily batch that credits them, and withdrawals.

-- One row per account that enabled confidential settlement. The withdrawal
-- address is permanent: the triggers below refuse to change or delete it, so
-- not even an operator with SQL access to the service can reassign a slot
-- through the service's own tables (the contract refuses it on-chain too).
CREATE TABLE confidential_merchants (
  account_id          uuid PRIMARY KEY REFERENCES accounts (id),
  merchant_address    text NOT NULL UNIQUE,
  -- What the wallet signed to prove it holds the key, and its signature.
  enablement_message  text NOT NULL,
  wallet_signature    text NOT NULL,
  -- Set once the slot is assigned on-chain; null while assigning.
  slot                numeric(78, 0),
  slot_secret         text,
  slot_tx_hash        text,
  mode                text NOT NULL DEFAULT 'both' CHECK (mode IN ('default', 'confidential', 'both')),
  created_at          timestamptz NOT NULL DEFAULT now(),
  enabled_at          timestamptz
);

CREATE FUNCTION confidential_merchant_is_permanent() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'a confidential withdrawal address is permanent and cannot be removed';
  END IF;
  IF NEW.merchant_address <> OLD.merchant_address
     OR (OLD.slot IS NOT NULL AND NEW.slot IS DISTINCT FROM OLD.slot) THEN
    RAISE EXCEPTION 'a confidential withdrawal address is permanent and cannot be reassigned';
  END IF;
  RETURN NEW;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER confidential_merchants_permanent
  BEFORE UPDATE OR DELETE ON confidential_merchants
  FOR EACH ROW EXECUTE FUNCTION confidential_merchant_is_permanent();

-- The credit one confidential payment owes its merchant, keyed by the
-- payment's authorization (the settlements row with the same key says
-- whether the money arrived). Written before anything is broadcast, so a
-- crash between the transfer and its answer never loses a merchant's credit.
CREATE TABLE confidential_credits (
  authorization_key  text PRIMARY KEY,
  account_id         uuid NOT NULL REFERENCES accounts (id),
  merchant_address   text NOT NULL,
  network            text NOT NULL,
  asset              text NOT NULL,
  payer              text NOT NULL,
  amount             numeric(78, 0) NOT NULL,
  payment_nonce      text NOT NULL,
  created_at         timestamptz NOT NULL DEFAULT now(),
  -- The signed receipt (spec 4.6 rule 8), once the payment settled.
  receipt            jsonb,
  receipt_signature  text,
  settled_at         timestamptz,
  -- The UTC day (days since 1970-01-01) of the batch that credited it.
  credited_day       integer,
  batch_tx_hash      text
);
CREATE INDEX confidential_credits_uncredited_idx ON confidential_credits (created_at)
  WHERE credited_day IS NULL;
CREATE INDEX confidential_credits_account_idx ON confidential_credits (account_id, created_at DESC);

-- The daily batch: one row per UTC day, a durable job. Whoever holds the
-- lease runs it; a replica that dies mid-batch leaves the row `running` and
-- its lease runs out, so another replica (or the restarted one) resumes it.
CREATE TABLE confidential_batches (
  day             integer PRIMARY KEY,
  status          text NOT NULL CHECK (status IN ('running', 'done')),
  owner           text NOT NULL,
  lease_until     timestamptz NOT NULL,
  started_at      timestamptz NOT NULL DEFAULT now(),
  finished_at     timestamptz,
  slots           integer,
  credits         integer,
  total_amount    numeric(78, 0),
  -- What this day credits, fixed before the first transaction is sent, so a
  -- resumed batch sends the same credits and marks the same payments even if
  -- more payments settled since.
  plan            jsonb,
  tx_hashes       jsonb NOT NULL DEFAULT '[]'
);

-- Withdrawals (spec 3.4): the wallet's signed request, the on-chain debit
-- and its finalization.
CREATE TABLE confidential_withdrawals (
  id                 uuid PRIMARY KEY,
  account_id         uuid NOT NULL REFERENCES accounts (id),
  amount             numeric(78, 0) NOT NULL,
  request            jsonb NOT NULL,
  signature          text NOT NULL,
  state              text NOT NULL CHECK (state IN ('submitting', 'debited', 'finalized', 'cancelled', 'failed')),
  onchain_id         numeric(78, 0),
  request_tx_hash    text,
  finalize_tx_hash   text,
  paid_amount        numeric(78, 0),
  error              text,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX confidential_withdrawals_account_idx ON confidential_withdrawals (account_id, created_at DESC);
CREATE INDEX confidential_withdrawals_open_idx ON confidential_withdrawals (state)
  WHERE state IN ('submitting', 'debited');
