-- Signer accounts leased across replicas: every replica may be given the
-- same keys, but an account's nonces are used by one replica at a time.
-- A replica announces itself in facilitator_replicas and renews its leases
-- on a heartbeat; a replica that dies gives its accounts up when its leases
-- expire, seconds later.

CREATE TABLE facilitator_replicas (
  holder      text PRIMARY KEY,
  expires_at  timestamptz NOT NULL
);

CREATE TABLE signer_leases (
  network     text NOT NULL,
  address     text NOT NULL,
  holder      text NOT NULL,
  expires_at  timestamptz NOT NULL,
  PRIMARY KEY (network, address)
);
