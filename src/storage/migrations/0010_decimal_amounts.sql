-- A settlement's amount as the requirements state it. EVM, Solana, NEAR and
-- Starknet state whole smallest units; the XRP Ledger states issued
-- currencies (RLUSD) as decimal values such as 0.25, which a scale of 0
-- would round away. Unconstrained numeric keeps both exactly.
ALTER TABLE settlements ALTER COLUMN amount TYPE numeric;
