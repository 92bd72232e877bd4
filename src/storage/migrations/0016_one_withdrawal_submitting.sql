-- One withdrawal request per account may be on its way to the chain at a
-- time: its slot nonce is taken when the request is prepared, so a second
-- request signed while the first is unconfirmed would carry the same nonce
-- and could never be told apart from it on-chain.
CREATE UNIQUE INDEX confidential_withdrawals_one_submitting_idx
  ON confidential_withdrawals (account_id) WHERE state = 'submitting';
