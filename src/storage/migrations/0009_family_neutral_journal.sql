-- The transaction journal for every chain family. `reference` is the chain's
-- own id of a transaction (an EVM hash, a Solana signature, a NEAR or XRPL
-- hash); `detail` is what the family needs to follow or re-send it after a
-- crash (EVM: the nonce and the raw signed bytes). `signer` is our account
-- that sent it, absent for keyless families (XRPL: the payer submits).
ALTER TABLE settlement_transactions RENAME COLUMN hash TO reference;

ALTER TABLE settlement_transactions ADD COLUMN detail jsonb NOT NULL DEFAULT '{}';

UPDATE settlement_transactions SET detail = jsonb_build_object('nonce', nonce, 'raw', raw);

ALTER TABLE settlement_transactions DROP COLUMN nonce;

ALTER TABLE settlement_transactions DROP COLUMN raw;

ALTER TABLE settlement_transactions ALTER COLUMN signer DROP NOT NULL;
