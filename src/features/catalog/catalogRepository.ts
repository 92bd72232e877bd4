/**
 * The catalog table: the one upsert that writes it and the reads behind
 * /discovery/resources and /discovery/search. Plain PostgreSQL (jsonb
 * containment, arrays, `english` full text), so PGlite and a server behave
 * the same.
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
 * What an upsert did: wrote the entry (new, or refreshed by its owner), or
 * left it alone because another account owns it.
 */
export type UpsertResult =
  | { kind: "written"; inserted: boolean; lastUpdated: Date }
  | { kind: "owned_elsewhere"; ownerAccountId: string | null };

const ENTRY_COLUMNS = sql.raw(
  "resource, tool_name, type, x402_version, method, description, mime_type, service_name, tags, icon_url, accepts, bazaar, last_updated",
);

/** EVM hex addresses are case-insensitive; the stored filter keys are lowercase. */
export function normalizePayTo(payTo: string): string {
  return /^0x[0-9A-Fa-f]{40}$/.test(payTo) ? payTo.toLowerCase() : payTo;
}

function conditions(f: CatalogFilters): RawBuilder<unknown>[] {
  const parts: RawBuilder<unknown>[] = [];
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

/**
 * A text[] literal, passed as one text parameter: the two drivers serialize
 * JS arrays differently, a literal string they pass the same way.
 */
function pgTextArray(values: readonly string[]): string {
  return `{${values.map((v) => `"${v.replace(/["\\]/g, (c) => `\\${c}`)}"`).join(",")}}`;
}

/**
 * Inserts an entry, or refreshes it when `accountId` owns it. The account
 * that first cataloged a resource owns it: a resource URL proves nothing
 * about who serves it, and /verify is free, so any other account's
 * declaration of the same (resource, tool_name) is ignored (no field, no
 * accept, no owner changes) and reported as `owned_elsewhere`. An entry
 * without an owner (written outside the payment path) goes to the first
 * account that declares it. The catalog neither deletes nor expires
 * entries, so ownership lasts as long as the entry.
 */
export async function upsertCatalogEntry(
  db: Db,
  draft: CatalogDraft,
  accountId: string | null,
): Promise<UpsertResult> {
  const doc = searchDocument({
    resource: draft.resource,
    serviceName: draft.serviceName,
    toolName: draft.toolName,
    tags: draft.tags,
    description: draft.description,
  });
  const result = await sql<{ inserted: boolean; last_updated: Date }>`
    INSERT INTO catalog_resources (
      resource, tool_name, type, x402_version, method, description, mime_type,
      service_name, tags, icon_url, accepts, extension_keys, bazaar, search_vector, account_id
    ) VALUES (
      ${draft.resource}, ${draft.toolName}, ${draft.type}, ${draft.x402Version},
      ${draft.method ?? null}, ${draft.description ?? null}, ${draft.mimeType ?? null},
      ${draft.serviceName ?? null}, ${pgTextArray(draft.tags ?? [])}::text[], ${draft.iconUrl ?? null},
      ${JSON.stringify([draft.accept])}::jsonb, ${pgTextArray(draft.extensionKeys)}::text[],
      ${JSON.stringify(draft.bazaar)}::jsonb,
      setweight(to_tsvector('english', ${doc.a}), 'A') ||
        setweight(to_tsvector('english', ${doc.b}), 'B') ||
        setweight(to_tsvector('english', ${doc.c}), 'C') ||
        setweight(to_tsvector('english', ${doc.d}), 'D'),
      ${accountId}
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
      last_updated = now()
    -- Checked on the locked row, so two accounts racing for a new URL
    -- cannot both write it: the loser finds the winner's row here.
    WHERE catalog_resources.account_id IS NOT DISTINCT FROM EXCLUDED.account_id
       OR catalog_resources.account_id IS NULL
    RETURNING (xmax = 0) AS inserted, last_updated
  `.execute(db);
  const row = result.rows[0];
  if (row) return { kind: "written", inserted: row.inserted, lastUpdated: row.last_updated };
  // No row back: the conflict's WHERE refused the update. Entries are never
  // deleted, so the owner read here is the one that refused it.
  const owner = await db
    .selectFrom("catalog_resources")
    .select("account_id")
    .where("resource", "=", draft.resource)
    .where("tool_name", "=", draft.toolName)
    .executeTakeFirst();
  return { kind: "owned_elsewhere", ownerAccountId: owner?.account_id ?? null };
}

/** Newest first: most recently cataloged or refreshed. */
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
 * Entries matching any of the terms, best first: `ts_rank` over the weighted
 * vector (service name and tool name, then tags, description, URL words),
 * normalized by document length, then newest.
 */
export async function searchCatalogEntries(
  db: Db,
  terms: readonly string[],
  filters: CatalogFilters,
  page: { limit: number; offset: number },
): Promise<CatalogEntryRow[]> {
  if (terms.length === 0) return [];
  const parts = [sql`search_vector @@ q.query`, ...conditions(filters)];
  const result = await sql<CatalogEntryRow>`
    SELECT ${ENTRY_COLUMNS}
    FROM catalog_resources, to_tsquery('english', ${tsqueryText(terms)}) AS q(query)
    ${whereClause(parts)}
    ORDER BY ts_rank(search_vector, q.query, 1) DESC, last_updated DESC, id DESC
    LIMIT ${page.limit} OFFSET ${page.offset}
  `.execute(db);
  return result.rows;
}
