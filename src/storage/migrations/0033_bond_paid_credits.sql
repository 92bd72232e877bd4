-- A confidential payment of a disputed day whose merchant the vault paid
-- from the operator bond (a challenge proved the day's split short): the
-- money is in the merchant's wallet, so the row is no longer pending and no
-- later batch of the reopened day may credit it again.
ALTER TABLE confidential_credits DROP CONSTRAINT confidential_credits_outcome_check;
ALTER TABLE confidential_credits ADD CONSTRAINT confidential_credits_outcome_check
  CHECK (outcome IN ('redeemed', 'returned', 'bond_paid'));
