-- The reorg watch reads the successes of the last minute, newest first,
-- every few seconds on every replica. No index led with the time a
-- settlement finished, so each of those reads scanned every settlement ever
-- recorded. Partial: the index holds only what the watch reads.
CREATE INDEX settlements_recent_successes_idx ON settlements (finished_at DESC, id DESC)
  WHERE status = 'succeeded' AND transaction IS NOT NULL;

-- The watch's sweep drops the signed bytes a journal entry keeps for a
-- re-send once the entry's watch is over. Only the last minute's entries and
-- those still in flight hold them; this index holds just those, so the sweep
-- does not read the whole journal. The key list is the one the sweep names
-- (SIGNED_DETAIL_KEYS in settlementWrites.ts).
CREATE INDEX settlement_transactions_signed_idx ON settlement_transactions (created_at)
  WHERE detail ?| ARRAY['raw', 'blob', 'signedTransaction', 'transaction'];
