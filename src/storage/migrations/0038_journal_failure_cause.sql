-- Who caused a transaction's on-chain failure, as the family read it from
-- the chain when the transaction became final (NEAR's receipt failure,
-- Starknet's revert frames): kept with the journal entry, so the replica
-- that finishes the settlement, another replica, a restarted process and
-- the reconciler all decide its cause alike.
ALTER TABLE settlement_transactions ADD COLUMN failure_cause text
  CHECK (failure_cause IN ('payer', 'requirements', 'service'));
