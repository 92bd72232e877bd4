-- One settlement record per payment authorization.
--
-- `authorization_key` names the signed authorization itself (for EVM: the
-- token, payer and nonce), the same for every copy of it. At most one row per
-- key may be `pending` or `succeeded`: concurrent duplicates, retries and
-- replicas meet at that unique index, and only the request that wrote the
-- row sends anything. The others wait for its outcome and answer it; each of
-- them is counted in `attempts` of that one row, so retries never create
-- rows that contradict each other. A `failed` or `not_attempted` row does
-- not hold the key: the payer may fix the cause (top up) and retry.
--
-- `not_attempted`: an infrastructure failure (RPC or database) stopped the
-- settlement before anything was sent; nobody's fault, nothing moved.
--
-- `billed`: the row's units were added to the quota. Set in the transaction
-- that moves the row to `succeeded`, whoever moves it (the request, a retry
-- or the reconciler), so a payment is billed exactly once.
ALTER TABLE settlements ADD COLUMN authorization_key text;

ALTER TABLE settlements ADD COLUMN attempts integer NOT NULL DEFAULT 1;

ALTER TABLE settlements ADD COLUMN billed boolean NOT NULL DEFAULT false;

ALTER TABLE settlements DROP CONSTRAINT settlements_status_check;

ALTER TABLE settlements ADD CONSTRAINT settlements_status_check
  CHECK (status IN ('pending', 'succeeded', 'failed', 'not_attempted'));

CREATE UNIQUE INDEX settlements_authorization_live_idx ON settlements (authorization_key)
  WHERE status IN ('pending', 'succeeded');

-- The first block each network's chain showed this database. A devnet that
-- restarts with a fresh chain, or an RPC pointed at another chain, shows a
-- different one: rows started before `since` are then not reconciled
-- against a chain that never saw them.
CREATE TABLE chain_identities (
  network  text PRIMARY KEY,
  genesis  text NOT NULL,
  since    timestamptz NOT NULL DEFAULT now()
);
