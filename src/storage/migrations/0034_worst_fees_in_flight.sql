-- What a journaled transaction could cost the account that sends it if it
-- failed on-chain (EVM gas limit times maximum fee, a Solana transaction's
-- signatures and compute-unit price, a NEAR relay's prepaid gas, a Starknet
-- fee bound), in the chain's smallest native unit. The failed-fee budget of
-- every replica counts each transaction still `sent` at it, so a burst sent
-- by several replicas at once is bounded before any of it has failed. Null:
-- rows from before, and transactions that cost the service nothing.
ALTER TABLE settlement_transactions ADD COLUMN worst_fee numeric(78, 0);

-- The budget's read: one network's transactions of the last hour.
CREATE INDEX settlement_transactions_network_created_idx
  ON settlement_transactions (network, created_at);
