-- Whether a payer has a success on record, read with its cooling in the
-- same statement on every settle: as a network's failed-fee budget runs
-- low, payers without one are refused first (failedFeeBudget.ts).
CREATE INDEX settlements_payer_successes_idx ON settlements (payer)
  WHERE status = 'succeeded' AND transaction IS NOT NULL;
