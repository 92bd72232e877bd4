-- Gas this service sent a payer so it could broadcast its own approve of
-- Permit2 (erc20ApprovalGasSponsoring). A payer is funded once until the
-- payment that funding was for settles: one funded whose payment did not
-- settle pays its own gas from then on. `settled` is learned from the
-- settlement the funding was sent for, when the payer is next looked at.
-- Each account's fundings over the last day count against its budget.
CREATE TABLE sponsored_fundings (
  id             bigserial PRIMARY KEY,
  network        text NOT NULL,
  payer          text NOT NULL,
  settlement_id  uuid NOT NULL REFERENCES settlements (id),
  account_id     uuid NOT NULL REFERENCES accounts (id),
  wei            numeric(78, 0) NOT NULL,
  settled        boolean NOT NULL DEFAULT false,
  funded_at      timestamptz NOT NULL DEFAULT now()
);

-- At most one funding a payer has not yet paid for, per network: a second
-- concurrent reservation (another replica) finds the first and is refused.
CREATE UNIQUE INDEX sponsored_fundings_one_open_idx ON sponsored_fundings (network, payer)
  WHERE NOT settled;

CREATE INDEX sponsored_fundings_account_idx ON sponsored_fundings (account_id, funded_at);
