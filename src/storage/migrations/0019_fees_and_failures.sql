-- What each settlement transaction cost the account that sent it (ours), in
-- the chain's smallest native unit (wei, FRI), where the chain says: the
-- dashboard shows each customer what its settlements cost in gas, and the
-- failures that cost us gas are what the failure limit counts.
ALTER TABLE settlement_transactions ADD COLUMN fee numeric(78, 0);

-- The failure limit counts an account's settlements that failed after
-- something was sent (our gas was spent), per network, over the last hour.
CREATE INDEX settlements_onchain_failures_idx ON settlements (account_id, network, finished_at)
  WHERE status = 'failed' AND transaction IS NOT NULL;
