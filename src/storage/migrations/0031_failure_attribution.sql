-- Who a settlement's on-chain failure is charged to: 'payer' (its wallet's
-- code, or its own move of the funds or the nonce) or 'requirements' (what
-- the settling account asked for). Null: not told apart (rows from before,
-- and failures found by the reconciler), charged to the account as before.
-- A payer's failures refuse that payer on every account for a cooling
-- period; the account's failure limit counts only the others, so a
-- stranger's wallet cannot switch a merchant off.
ALTER TABLE settlements ADD COLUMN failure_cause text
  CHECK (failure_cause IN ('payer', 'requirements'));

-- The cooling check: a payer's recent on-chain failures, on any account.
CREATE INDEX settlements_payer_failures_idx ON settlements (payer, finished_at)
  WHERE status = 'failed' AND transaction IS NOT NULL AND failure_cause = 'payer';

-- In-flight settles count against an account that already has failures of
-- its own: its pending rows per network.
CREATE INDEX settlements_in_flight_idx ON settlements (account_id, network, started_at)
  WHERE status = 'pending';

-- A mined transaction is never sent again, so the signed bytes its journal
-- entry kept for a re-send (EVM `raw`, with a payer's sponsored approve; the
-- XRPL `blob`; NEAR's `signedTransaction`; a Solana or Starknet
-- `transaction`) are dropped, as every new final entry's are; and so are
-- those of any entry whose settlement is final (a replaced version that was
-- never mined).
UPDATE settlement_transactions t
  SET detail = t.detail - ARRAY['raw', 'blob', 'signedTransaction', 'transaction']
  WHERE t.detail ?| ARRAY['raw', 'blob', 'signedTransaction', 'transaction']
    AND (t.status <> 'sent'
      OR EXISTS (SELECT 1 FROM settlements s
        WHERE s.id = t.settlement_id AND s.status <> 'pending'));
