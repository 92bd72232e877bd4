-- One payment, one success answer.
--
-- A resource server delivers on every `success: true`, so a payment is
-- answered success at most once, to the request that settled it (or, when
-- that request could only answer `settlement_pending`, to the first
-- re-presentation of the same payment by the same API key once the chain
-- has it). `success_answered_at` and `success_request_id` record that
-- answer: the guarded update that sets them is the one place a success is
-- handed out, so the rule holds across restarts and replicas.
--
-- `settled_amount`: the amount the answer named (the mechanism's own, which
-- for `upto` and batch settlements can differ from the requirements).
ALTER TABLE settlements ADD COLUMN success_answered_at timestamptz;

ALTER TABLE settlements ADD COLUMN success_request_id text;

ALTER TABLE settlements ADD COLUMN settled_amount text;

-- Every success recorded before this migration was answered as one.
UPDATE settlements SET success_answered_at = coalesce(finished_at, started_at)
  WHERE status = 'succeeded';

-- A success that moved nothing (an `upto` settled at zero) does not hold its
-- authorization: the signed permit was not consumed on-chain, and holding
-- the key would let a later settle of it at any amount be answered from a
-- row under which no money moved.
DROP INDEX settlements_authorization_live_idx;

CREATE UNIQUE INDEX settlements_authorization_live_idx ON settlements (authorization_key)
  WHERE status = 'pending' OR (status = 'succeeded' AND transaction IS NOT NULL);
