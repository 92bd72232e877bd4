/**
 * The catalog table: the one upsert that writes it (and records another
 * account's claim on an entry it does not hold) and the reads behind
 * /discovery/resources and /discovery/search. Plain PostgreSQL (jsonb
 * containment, arrays, `english` full text), so PGlite and a server behave
 * the same. Who owns an entry is decided by the proof checker
 * (ownershipChecker.ts), never by the order payments arrive in.
 */
import { sql, type RawBuilder } from "kysely";
import type { PaymentRequirements } from "@x402/core/types";
import type { Db } from "../../storage/db.js";
import type { CatalogDraft } from "./declaration.js";
import { MAX_ACCEPTS_PER_RESOURCE, type ResourceType } from "./limits.js";
import { searchDocument, tsqueryText } from "./searchText.js";

export interface CatalogFilters {
  type?: ResourceType | undefined;
  payTo?: string | undefined;
  scheme?: string | undefined;
  network?: string | undefined;
  /** Every one of these extension keys must be present. */
  extensions?: readonly string[] | undefined;
}

/** A catalog row as the read endpoints need it. */
export interface CatalogEntryRow {
  resource: string;
  tool_name: string;
  type: ResourceType;
  x402_version: number;
  method: string | null;
  description: string | null;
  mime_type: string | null;
  service_name: string | null;
  tags: string[];
  icon_url: string | null;
  accepts: PaymentRequirements[];
  bazaar: Record<string, unknown>;
  last_updated: Date;
}

/**
 * What an upsert did: wrote the entry (new, or refreshed by its owner);
 * recorded the declaring account's claim on an entry another account holds
 * (the proof checker decides it); or, for a declaration without an account,
 * left another account's entry alone.
 */
export type UpsertResult =
  | { kind: "written"; inserted: boolean; lastUpdated: Date }
  | { kind: "claimed"; ownerAccountId: string | null; newClaim: boolean }
  | { kind: "owned_elsewhere"; ownerAccountId: string | null };

export interface UpsertOptions {
  /**
   * A claim (or a payment for a stale entry) asks for a check of the entry
   * now, but never sooner than this after the last one: /verify is free, so
   * declarations must not turn into fetches of a stranger's resource.
   */
  minCheckGapMs: number;
}

/** The default of `UpsertOptions.minCheckGapMs`: five minutes. */
export const MIN_CHECK_GAP_MS = 5 * 60_000;

/** Listed entries: a stale one has left the listing (docs/discovery.md). */
const LISTED = sql`state <> 'stale'`;

const ENTRY_COLUMNS = sql.raw(
  "resource, tool_name, type, x402_version, method, description, mime_type, service_name, tags, icon_url, accepts, bazaar, last_updated",
);

/** EVM hex addresses are case-insensitive; the stored filter keys are lowercase. */
export function normalizePayTo(payTo: string): string {
  return /^0x[0-9A-Fa-f]{40}$/.test(payTo) ? payTo.toLowerCase() : payTo;
}

function conditions(f: CatalogFilters): RawBuilder<unknown>[] {
  const parts: RawBuilder<unknown>[] = [LISTED];
  if (f.type) parts.push(sql`type = ${f.type}`);
  const acceptKey: Record<string, string> = {};
  if (f.scheme) acceptKey["scheme"] = f.scheme;
  if (f.network) acceptKey["network"] = f.network;
  if (f.payTo) acceptKey["payTo"] = normalizePayTo(f.payTo);
  // One object inside the array: scheme, network and payTo must all hold for
  // the same payment kind, which the GIN index answers directly.
  if (Object.keys(acceptKey).length > 0) {
    parts.push(sql`accept_keys @> ${JSON.stringify([acceptKey])}::jsonb`);
  }
  if (f.extensions && f.extensions.length > 0) {
    parts.push(sql`extension_keys @> ${pgTextArray(f.extensions)}::text[]`);
  }
  return parts;
}

function whereClause(parts: RawBuilder<unknown>[]): RawBuilder<unknown> {
  return parts.length === 0 ? sql`` : sql`WHERE ${sql.join(parts, sql` AND `)}`;
}

/** The weighted `tsvector` of an entry (searchText.ts decides the words and weights). */
export function searchVector(draft: {
  resource: string;
  type: string;
  serviceName?: string | undefined;
  toolName?: string | undefined;
  tags?: readonly string[] | undefined;
  description?: string | undefined;
}): RawBuilder<unknown> {
  const doc = searchDocument(draft);
  return sql`setweight(to_tsvector('english', ${doc.a}), 'A') ||
        setweight(to_tsvector('english', ${doc.b}), 'B') ||
        setweight(to_tsvector('english', ${doc.c}), 'C') ||
        setweight(to_tsvector('english', ${doc.d}), 'D')`;
}

/** `now()`, or `gapMs` after the last check when that is later. */
function checkAfterGap(gapMs: number): RawBuilder<unknown> {
  return sql`GREATEST(now(), coalesce(catalog_resources.last_check_at + ${gapMs}::int * interval '1 millisecond', now()))`;
}

/**
 * A text[] literal, passed as one text parameter: the two drivers serialize
 * JS arrays differently, a literal string they pass the same way.
 */
export function pgTextArray(values: readonly string[]): string {
  return `{${values.map((v) => `"${v.replace(/["\\]/g, (c) => `\\${c}`)}"`).join(",")}}`;
}

/**
 * Inserts an entry, or refreshes it when `accountId` owns it (or when it has
 * no owner: an entry written outside the payment path goes to the first
 * account that declares it).
 *
 * Another account's declaration of the same (resource, tool_name) changes
 * nothing of the entry (no field, no accept, no owner): a resource URL
 * proves nothing about who serves it, and /verify is free. It is recorded
 * as that account's claim, and the entry is checked soon (not sooner than
 * `minCheckGapMs` after its last check): the proof checker gives the entry
 * to the account the resource's own 402 answer names (ownershipChecker.ts).
 *
 * A payment for a stale entry by its owner asks for a check too: the entry
 * is listed again once the resource answers 402 again.
 */
export async function upsertCatalogEntry(
  db: Db,
  draft: CatalogDraft,
  accountId: string | null,
  opts: UpsertOptions = { minCheckGapMs: MIN_CHECK_GAP_MS },
): Promise<UpsertResult> {
  const result = await sql<{ inserted: boolean; last_updated: Date }>`
    INSERT INTO catalog_resources (
      resource, tool_name, type, x402_version, method, description, mime_type,
      service_name, tags, icon_url, accepts, extension_keys, bazaar, search_vector, account_id,
      probe_url
    ) VALUES (
      ${draft.resource}, ${draft.toolName}, ${draft.type}, ${draft.x402Version},
      ${draft.method ?? null}, ${draft.description ?? null}, ${draft.mimeType ?? null},
      ${draft.serviceName ?? null}, ${pgTextArray(draft.tags ?? [])}::text[], ${draft.iconUrl ?? null},
      ${JSON.stringify([draft.accept])}::jsonb, ${pgTextArray(draft.extensionKeys)}::text[],
      ${JSON.stringify(draft.bazaar)}::jsonb,
      ${searchVector(draft)},
      ${accountId}, ${probeUrlOf(draft)}
    )
    ON CONFLICT (resource, tool_name) DO UPDATE SET
      type = EXCLUDED.type,
      x402_version = EXCLUDED.x402_version,
      method = EXCLUDED.method,
      description = EXCLUDED.description,
      mime_type = EXCLUDED.mime_type,
      service_name = EXCLUDED.service_name,
      tags = EXCLUDED.tags,
      icon_url = EXCLUDED.icon_url,
      accepts = catalog_merge_accepts(catalog_resources.accepts, EXCLUDED.accepts, ${MAX_ACCEPTS_PER_RESOURCE}::int),
      extension_keys = EXCLUDED.extension_keys,
      bazaar = EXCLUDED.bazaar,
      search_vector = EXCLUDED.search_vector,
      account_id = EXCLUDED.account_id,
      probe_url = EXCLUDED.probe_url,
      next_check_at = CASE WHEN catalog_resources.state = 'stale'
                           THEN LEAST(catalog_resources.next_check_at, ${checkAfterGap(opts.minCheckGapMs)})
                           ELSE catalog_resources.next_check_at END,
      last_updated = now()
    -- Checked on the locked row, so two accounts racing for a new URL
    -- cannot both write it: the loser finds the winner's row here.
    WHERE catalog_resources.account_id IS NOT DISTINCT FROM EXCLUDED.account_id
       OR catalog_resources.account_id IS NULL
    RETURNING (xmax = 0) AS inserted, last_updated
  `.execute(db);
  const row = result.rows[0];
  if (row) return { kind: "written", inserted: row.inserted, lastUpdated: row.last_updated };
  // No row back: the conflict's WHERE refused the update, so another account
  // holds the entry (entries are never deleted).
  if (accountId === null) {
    const owner = await db
      .selectFrom("catalog_resources")
      .select("account_id")
      .where("resource", "=", draft.resource)
      .where("tool_name", "=", draft.toolName)
      .executeTakeFirst();
    return { kind: "owned_elsewhere", ownerAccountId: owner?.account_id ?? null };
  }
  return recordClaim(db, draft, accountId, opts.minCheckGapMs);
}

/** The URL the proof checker fetches for this declaration; null when it is the resource itself. */
function probeUrlOf(draft: CatalogDraft): string | null {
  return draft.probeUrl !== undefined && draft.probeUrl !== draft.resource ? draft.probeUrl : null;
}

/**
 * Records (or refreshes) `accountId`'s claim on an entry another account
 * holds, and brings the entry's next check forward to now, or to
 * `gapMs` after its last check, whichever is later. One statement.
 */
async function recordClaim(
  db: Db,
  draft: CatalogDraft,
  accountId: string,
  gapMs: number,
): Promise<UpsertResult> {
  const result = await sql<{ new_claim: boolean | null; owner: string | null }>`
    WITH claim AS (
      INSERT INTO catalog_claims (resource, tool_name, account_id, draft, probe_url)
      VALUES (${draft.resource}, ${draft.toolName}, ${accountId}, ${JSON.stringify(draft)}::jsonb,
              ${probeUrlOf(draft)})
      ON CONFLICT (resource, tool_name, account_id) DO UPDATE SET
        draft = EXCLUDED.draft,
        probe_url = EXCLUDED.probe_url,
        declared_at = now()
      RETURNING (xmax = 0) AS new_claim
    ), due AS (
      -- Runs although nothing reads it (PostgreSQL runs every data-modifying WITH).
      UPDATE catalog_resources SET next_check_at = ${checkAfterGap(gapMs)}
       WHERE resource = ${draft.resource} AND tool_name = ${draft.toolName}
         AND next_check_at > ${checkAfterGap(gapMs)}
      RETURNING id
    )
    SELECT (SELECT new_claim FROM claim) AS new_claim,
           (SELECT account_id FROM catalog_resources
             WHERE resource = ${draft.resource} AND tool_name = ${draft.toolName}) AS owner
  `.execute(db);
  const row = result.rows[0];
  return {
    kind: "claimed",
    ownerAccountId: row?.owner ?? null,
    newClaim: row?.new_claim === true,
  };
}

/** Listed entries, newest first: most recently cataloged or refreshed. */
export async function listCatalogEntries(
  db: Db,
  filters: CatalogFilters,
  page: { limit: number; offset: number },
): Promise<CatalogEntryRow[]> {
  const result = await sql<CatalogEntryRow>`
    SELECT ${ENTRY_COLUMNS} FROM catalog_resources
    ${whereClause(conditions(filters))}
    ORDER BY last_updated DESC, id DESC
    LIMIT ${page.limit} OFFSET ${page.offset}
  `.execute(db);
  return result.rows;
}

export async function countCatalogEntries(db: Db, filters: CatalogFilters): Promise<number> {
  const result = await sql<{ total: number }>`
    SELECT count(*)::int AS total FROM catalog_resources ${whereClause(conditions(filters))}
  `.execute(db);
  return result.rows[0]?.total ?? 0;
}

/**
 * A page of the entries matching any of the terms, best first: `ts_rank`
 * over the weighted vector (service name and tool name, then tags,
 * description, type and URL words), normalized by document length, then
 * newest; and how many entries match in all. One statement: ranking reads
 * every match anyway, so counting them costs no second search.
 */
export async function searchCatalogEntries(
  db: Db,
  terms: readonly string[],
  filters: CatalogFilters,
  page: { limit: number; offset: number },
): Promise<{ rows: CatalogEntryRow[]; total: number }> {
  if (terms.length === 0) return { rows: [], total: 0 };
  const parts = [sql`search_vector @@ q.query`, ...conditions(filters)];
  const result = await sql<CatalogEntryRow & { total: number }>`
    WITH matches AS MATERIALIZED (
      SELECT id AS match_id, ts_rank(search_vector, q.query, 1) AS match_rank,
             last_updated AS match_at
        FROM catalog_resources, to_tsquery('english', ${tsqueryText(terms)}) AS q(query)
      ${whereClause(parts)}
    ), top AS (
      SELECT * FROM matches
       ORDER BY match_rank DESC, match_at DESC, match_id DESC
       LIMIT ${page.limit} OFFSET ${page.offset}
    )
    -- One row at least (the total) even when the page is empty.
    SELECT (SELECT count(*)::int FROM matches) AS total, page.*
      FROM (SELECT 1) AS one
      LEFT JOIN (
        SELECT ${ENTRY_COLUMNS}, top.*
          FROM top JOIN catalog_resources ON id = top.match_id
      ) AS page ON true
     ORDER BY page.match_rank DESC, page.match_at DESC, page.match_id DESC
  `.execute(db);
  return {
    rows: result.rows.filter((r) => r.resource !== null),
    total: result.rows[0]?.total ?? 0,
  };
}
