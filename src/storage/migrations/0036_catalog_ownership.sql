-- Discovery catalog (issue 68): an entry belongs to the account the
-- resource itself names, not to the first account that verified a payment
-- for its URL; an entry whose resource stops answering 402 leaves the
-- listing; search also matches the type and the URL's scheme.
-- Written only by features/catalog (the cataloger, the proof checker and the
-- dashboard's catalog view).

-- The entry's state (docs/discovery.md, "Who owns an entry"):
--   unproven  listed; nobody has proven the resource names its owner yet
--   proven    listed; the owner's proof (`proof`) held at the last check
--   stale     not listed: the resource has not answered 402 for too long
-- `probe_url` is the URL the checker fetches (origin + concrete path of the
-- last payment; the resource URL itself when null). `next_check_at` is when
-- the checker looks at the entry next; a new entry is due at once.
ALTER TABLE catalog_resources
  ADD COLUMN state text NOT NULL DEFAULT 'unproven'
    CHECK (state IN ('unproven', 'proven', 'stale')),
  ADD COLUMN proof text CHECK (proof IN ('pay_to', 'challenge')),
  ADD COLUMN proven_at timestamptz,
  ADD COLUMN probe_url text,
  ADD COLUMN last_402_at timestamptz,
  ADD COLUMN last_check_at timestamptz,
  ADD COLUMN last_check_error text,
  ADD COLUMN next_check_at timestamptz NOT NULL DEFAULT now();

CREATE INDEX catalog_resources_due_idx ON catalog_resources (next_check_at);

-- The owner's view in the dashboard.
CREATE INDEX catalog_resources_account_idx ON catalog_resources (account_id)
  WHERE account_id IS NOT NULL;

-- Search: the type and the URL's scheme are words of the entry too (the
-- upsert writes them from now on; existing entries get them here).
UPDATE catalog_resources
   SET search_vector = search_vector ||
       setweight(to_tsvector('english', type || ' ' || split_part(resource, ':', 1)), 'D');

-- Another account's declaration of an entry it does not hold: kept as a
-- claim until the checker decides it. `draft` is the entry as that account
-- declared it (catalogRepository.ts, ClaimDraft), applied if it takes over.
-- `result` is the last check's verdict, shown to the claiming account.
CREATE TABLE catalog_claims (
  resource       text NOT NULL,
  tool_name      text NOT NULL,
  account_id     uuid NOT NULL REFERENCES accounts (id),
  draft          jsonb NOT NULL,
  probe_url      text,
  claimed_at     timestamptz NOT NULL DEFAULT now(),
  declared_at    timestamptz NOT NULL DEFAULT now(),
  last_check_at  timestamptz,
  result         text NOT NULL DEFAULT 'pending'
    CHECK (result IN ('pending', 'not_proven', 'owner_holds')),
  PRIMARY KEY (resource, tool_name, account_id),
  FOREIGN KEY (resource, tool_name) REFERENCES catalog_resources (resource, tool_name)
    ON DELETE CASCADE
);

CREATE INDEX catalog_claims_account_idx ON catalog_claims (account_id);

-- What happened to entries, for the accounts involved: `account_id` holds
-- the entry after the event, `previous_account_id` held it before a
-- takeover. Both see the event in the dashboard.
CREATE TABLE catalog_events (
  id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  resource             text NOT NULL,
  tool_name            text NOT NULL,
  kind                 text NOT NULL
    CHECK (kind IN ('proven', 'unproven', 'takeover', 'stale', 'listed_again')),
  account_id           uuid REFERENCES accounts (id),
  previous_account_id  uuid REFERENCES accounts (id),
  detail               jsonb NOT NULL DEFAULT '{}'::jsonb,
  at                   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX catalog_events_account_idx ON catalog_events (account_id, id DESC);
CREATE INDEX catalog_events_previous_idx ON catalog_events (previous_account_id, id DESC)
  WHERE previous_account_id IS NOT NULL;

-- The challenge an account publishes at /.well-known/x402-catalog on a
-- resource's origin to prove it controls the origin (the strongest proof).
CREATE TABLE catalog_challenges (
  account_id  uuid PRIMARY KEY REFERENCES accounts (id),
  token       text NOT NULL UNIQUE,
  created_at  timestamptz NOT NULL DEFAULT now()
);
