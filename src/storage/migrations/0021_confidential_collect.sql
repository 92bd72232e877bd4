-- Confidential settlement against a vault that collects every payment
-- itself (issue 37): a credit names the vault's record of its payment, the
-- day the vault collected it in, and what became of it; one replica at a
-- time holds the vault's operator key.

-- How the vault names the payment (keccak256(payer, nonce)) and the UTC day
-- it collected it in: the day whose pool it belongs to, and the day its
-- receipt carries. Null until read from the vault (rows written before).
ALTER TABLE confidential_credits ADD COLUMN payment_key text;
ALTER TABLE confidential_credits ADD COLUMN day integer;
-- Credited another way than by its day's batch: 'redeemed' (its receipt,
-- on-chain) or 'returned' (the vault sent it back to its payer).
ALTER TABLE confidential_credits ADD COLUMN outcome text
  CHECK (outcome IN ('redeemed', 'returned'));
-- Why its day's batch skipped it (the vault has no such payment, or not for
-- that day): reported, never fatal to the day.
ALTER TABLE confidential_credits ADD COLUMN problem text;
CREATE UNIQUE INDEX confidential_credits_payment_key_idx ON confidential_credits (payment_key);
CREATE INDEX confidential_credits_open_day_idx ON confidential_credits (day)
  WHERE credited_day IS NULL AND outcome IS NULL;

-- What the batch skipped and reported, and which attempt of the day it ran.
ALTER TABLE confidential_batches ADD COLUMN skipped jsonb NOT NULL DEFAULT '[]';
ALTER TABLE confidential_batches ADD COLUMN attempt integer;

-- The vault's operator key is held by one replica at a time: its
-- transactions take the account's next nonce, so two replicas sending at
-- once would collide. One row; a holder renews its lease while it sends.
CREATE TABLE confidential_operator_lease (
  id          integer PRIMARY KEY CHECK (id = 1),
  holder      text,
  expires_at  timestamptz NOT NULL DEFAULT '-infinity'
);
INSERT INTO confidential_operator_lease (id) VALUES (1);
