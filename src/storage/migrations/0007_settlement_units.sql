-- Quota units a settlement is worth if it succeeds: 1 for a payment, one per
-- voucher for a batch-settlement claim, 0 for a batch-settlement deposit,
-- settle or refund and for anything on xrpl:0. Recorded on every row so a
-- claim's voucher count can be audited against the quota it used.
ALTER TABLE settlements ADD COLUMN units integer NOT NULL DEFAULT 1;
