/**
 * The public reads of the catalog, in the envelopes the official bazaar
 * client (`withBazaar(...).extensions.bazaar`) reads with no adapter:
 * listing is `{ x402Version, items, pagination: { limit, offset, total } }`,
 * search is `{ x402Version, resources, partialResults, pagination: { limit,
 * offset, total, cursor } }`. In both, `limit` is the page size applied (not
 * the number of results), `offset` where the page starts and `total` how
 * many entries match. Stale entries are in neither (catalogRepository.ts).
 * Repeated pages come from a short-lived cache (readCache.ts).
 */
import type {
  DiscoveryResource,
  DiscoveryResourcesResponse,
  SearchDiscoveryResourcesResponse,
} from "@x402/extensions/bazaar";
import { ServiceError } from "../../lib/errors.js";
import type { Db } from "../../storage/db.js";
import {
  countCatalogEntries,
  listCatalogEntries,
  normalizePayTo,
  searchCatalogEntries,
  type CatalogEntryRow,
  type CatalogFilters,
} from "./catalogRepository.js";
import { MAX_OFFSET } from "./limits.js";
import { Gate } from "./gate.js";
import type { ReadCache } from "./readCache.js";
import { decodeCursor, encodeCursor, searchScope } from "./searchCursor.js";
import { searchTerms } from "./searchText.js";

const X402_VERSION = 2;

/**
 * The search answer: the official envelope, whose `pagination` carries the
 * applied `limit` and the `cursor`, plus `offset` and `total` as listing has
 * them (clients that know only the official fields ignore the others).
 */
export type SearchResponse = SearchDiscoveryResourcesResponse & {
  pagination: { limit: number; offset: number; total: number; cursor: string | null };
};

export interface ListRequest extends CatalogFilters {
  limit: number;
  offset: number;
}

export interface SearchRequest extends CatalogFilters {
  query: string;
  limit: number;
  cursor?: string | undefined;
  /** Where to start without a cursor (at most MAX_OFFSET); default 0. */
  offset?: number | undefined;
}

function toDiscoveryResource(row: CatalogEntryRow): DiscoveryResource {
  return {
    resource: row.resource,
    type: row.type,
    x402Version: row.x402_version,
    accepts: row.accepts,
    lastUpdated: row.last_updated.toISOString(),
    ...(row.description !== null ? { description: row.description } : {}),
    ...(row.mime_type !== null ? { mimeType: row.mime_type } : {}),
    ...(row.service_name !== null ? { serviceName: row.service_name } : {}),
    ...(row.tags.length > 0 ? { tags: row.tags } : {}),
    ...(row.icon_url !== null ? { iconUrl: row.icon_url } : {}),
    extensions: { bazaar: row.bazaar },
  };
}

/** Filters in a canonical form: the cache key and the cursor scope. */
function canonicalFilters(f: CatalogFilters): (string | null)[] {
  return [
    f.type ?? null,
    f.payTo ? normalizePayTo(f.payTo) : null,
    f.scheme ?? null,
    f.network ?? null,
    f.extensions && f.extensions.length > 0 ? [...new Set(f.extensions)].sort().join(",") : null,
  ];
}

export class CatalogReader {
  private readonly gate: Gate;

  /**
   * @param maxConcurrentQueries database queries discovery may run at once
   *   (see gate.ts); the rest wait their turn in memory.
   */
  constructor(
    private readonly db: Db,
    private readonly cache: ReadCache<unknown>,
    maxConcurrentQueries = 4,
  ) {
    this.gate = new Gate(maxConcurrentQueries);
  }

  /**
   * @throws ServiceError invalid_request for an offset deeper than
   *   MAX_OFFSET into a catalog that reaches that deep (past its end, the
   *   page is simply empty).
   */
  async list(req: ListRequest): Promise<DiscoveryResourcesResponse> {
    if (req.offset > MAX_OFFSET) {
      const total = await this.total(req);
      if (req.offset < total) {
        throw new ServiceError(
          "invalid_request",
          `offset may be at most ${MAX_OFFSET} while entries remain past it; narrow the filters to reach them`,
        );
      }
      return {
        x402Version: X402_VERSION,
        items: [],
        pagination: { limit: req.limit, offset: req.offset, total },
      };
    }
    const key = JSON.stringify(["list", ...canonicalFilters(req), req.limit, req.offset]);
    return this.cache.get(key, async () => {
      const page = { limit: req.limit, offset: req.offset };
      // Sequential on purpose: the embedded database has one connection.
      const rows = await this.gate.run(() => listCatalogEntries(this.db, req, page));
      // Pages of one filter share their total, so it is cached on its own.
      const total =
        req.offset === 0 && rows.length < req.limit ? rows.length : await this.total(req);
      return {
        x402Version: X402_VERSION,
        items: rows.map(toDiscoveryResource),
        pagination: { limit: req.limit, offset: req.offset, total },
      } satisfies DiscoveryResourcesResponse;
    }) as Promise<DiscoveryResourcesResponse>;
  }

  /** How many entries match the filters; pages of one filter share it, so it is cached on its own. */
  private async total(filters: CatalogFilters): Promise<number> {
    return (await this.cache.get(JSON.stringify(["total", ...canonicalFilters(filters)]), () =>
      this.gate.run(() => countCatalogEntries(this.db, filters)),
    )) as number;
  }

  /**
   * @throws ServiceError invalid_request for a cursor from elsewhere.
   */
  async search(req: SearchRequest): Promise<SearchResponse> {
    const terms = searchTerms(req.query);
    const scope = searchScope([terms, ...canonicalFilters(req)]);
    let offset = req.offset ?? 0;
    if (req.cursor !== undefined) {
      const decoded = decodeCursor(req.cursor, scope, MAX_OFFSET);
      if (!decoded.ok) throw new ServiceError("invalid_request", decoded.reason);
      offset = decoded.offset;
    }
    const key = JSON.stringify(["search", scope, req.limit, offset]);
    return this.cache.get(key, async () => {
      // One extra row tells whether another page exists.
      const { rows, total } = await this.gate.run(() =>
        searchCatalogEntries(this.db, terms, req, { limit: req.limit + 1, offset }),
      );
      const page = rows.slice(0, req.limit);
      const next = offset + req.limit;
      const more = rows.length > req.limit;
      return {
        x402Version: X402_VERSION,
        resources: page.map(toDiscoveryResource),
        // Only past the deepest page a cursor may reach are matches left out.
        partialResults: more && next > MAX_OFFSET,
        pagination: {
          limit: req.limit,
          offset,
          total,
          cursor: more && next <= MAX_OFFSET ? encodeCursor(next, scope) : null,
        },
      } satisfies SearchResponse;
    }) as Promise<SearchResponse>;
  }
}
