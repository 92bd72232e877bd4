-- Why an account was suspended, in the operator's words, so the account's
-- owner reads it in the dashboard instead of a guess.
ALTER TABLE accounts ADD COLUMN suspended_reason text;
