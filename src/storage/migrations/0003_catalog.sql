-- The discovery catalog (bazaar): one row per paid resource, written only
-- behind a payment that verified or settled here.
-- Statements are separated by a semicolon at the end of a line, so function
-- bodies below never end a line with one.

-- The filter keys of an `accepts` array: scheme, network and payTo of each
-- entry, with EVM hex addresses lowercased so a filter matches whatever case
-- the caller pastes. Immutable, so it can feed a stored generated column.
CREATE FUNCTION catalog_accept_keys(accepts jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(jsonb_agg(jsonb_build_object(
    'scheme', a ->> 'scheme',
    'network', a ->> 'network',
    'payTo', CASE WHEN a ->> 'payTo' ~ '^0x[0-9A-Fa-f]{40}$' THEN lower(a ->> 'payTo') ELSE a ->> 'payTo' END
  )), '[]'::jsonb)
  FROM jsonb_array_elements(accepts) AS a
$$;

-- Merges newly seen payment kinds into a resource's `accepts`: an incoming
-- entry replaces the stored one for the same (scheme, network, asset), the
-- newest come first, and at most `max_entries` are kept. Running inside the
-- upsert makes the merge atomic under concurrent payments for one resource.
CREATE FUNCTION catalog_merge_accepts(current_accepts jsonb, incoming jsonb, max_entries integer)
RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(jsonb_agg(kept.e ORDER BY kept.ord), '[]'::jsonb)
  FROM (
    SELECT merged.e, merged.ord
    FROM (
      SELECT i.e, i.ord FROM jsonb_array_elements(incoming) WITH ORDINALITY AS i(e, ord)
      UNION ALL
      SELECT c.e, c.ord + 1000000
      FROM jsonb_array_elements(current_accepts) WITH ORDINALITY AS c(e, ord)
      WHERE NOT EXISTS (
        SELECT 1 FROM jsonb_array_elements(incoming) AS n(e)
        WHERE n.e ->> 'scheme' = c.e ->> 'scheme'
          AND n.e ->> 'network' = c.e ->> 'network'
          AND lower(n.e ->> 'asset') = lower(c.e ->> 'asset')
      )
    ) AS merged
    ORDER BY merged.ord
    LIMIT max_entries
  ) AS kept
$$;

-- `resource` is the canonical URL (origin + path or route template). MCP
-- tools share one server URL, so the key is (resource, tool_name), with
-- tool_name '' for HTTP resources. `bazaar` is the validated declaration
-- (info, schema, routeTemplate) echoed to clients; `search_vector` is built
-- by the upsert from the service name, tags, description and URL words.
CREATE TABLE catalog_resources (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  resource        text NOT NULL,
  tool_name       text NOT NULL DEFAULT '',
  type            text NOT NULL CHECK (type IN ('http', 'mcp')),
  x402_version    integer NOT NULL,
  method          text,
  description     text,
  mime_type       text,
  service_name    text,
  tags            text[] NOT NULL DEFAULT '{}',
  icon_url        text,
  accepts         jsonb NOT NULL,
  accept_keys     jsonb GENERATED ALWAYS AS (catalog_accept_keys(accepts)) STORED,
  extension_keys  text[] NOT NULL DEFAULT '{}',
  bazaar          jsonb NOT NULL,
  search_vector   tsvector NOT NULL,
  account_id      uuid REFERENCES accounts (id),
  cataloged_at    timestamptz NOT NULL DEFAULT now(),
  last_updated    timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT catalog_resources_resource_key UNIQUE (resource, tool_name)
);

-- Listing: newest first, with id as the tie-break that keeps pages stable.
CREATE INDEX catalog_resources_recent_idx ON catalog_resources (last_updated DESC, id DESC);

-- GIN indexes without the pending list (fastupdate = off): the catalog is
-- read far more than written, and PGlite never vacuums, so entries parked in
-- a pending list would be scanned linearly by every search.
CREATE INDEX catalog_resources_search_idx ON catalog_resources
  USING gin (search_vector) WITH (fastupdate = off);

CREATE INDEX catalog_resources_accepts_idx ON catalog_resources
  USING gin (accept_keys jsonb_path_ops) WITH (fastupdate = off);

CREATE INDEX catalog_resources_extensions_idx ON catalog_resources
  USING gin (extension_keys) WITH (fastupdate = off);
