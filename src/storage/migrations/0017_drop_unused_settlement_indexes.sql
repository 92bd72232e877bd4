-- Every settlement row is written three times (its intent, its first
-- transaction, its outcome), and each of those writes also writes an entry
-- in every index of the table, since each changes an indexed column. Two of
-- the indexes were never read:
--   settlements_account_started_idx (account_id, started_at DESC) is the
--     leading part of settlements_account_page_idx, which answers every
--     query it could;
--   settlements_fingerprint_idx: no query looks a settlement up by its
--     payload fingerprint (duplicates are found by authorization_key).
DROP INDEX IF EXISTS settlements_account_started_idx;
DROP INDEX IF EXISTS settlements_fingerprint_idx;
