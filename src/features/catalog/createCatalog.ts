/**
 * The discovery catalog's writer (behind valid payments) and its cached
 * reader, sized for the database they run on.
 */
import type { Db } from "../../storage/db.js";
import type { Logger } from "../../lib/logger.js";
import { Cataloger } from "./cataloger.js";
import { CatalogReader } from "./catalogReader.js";
import { ReadCache } from "./readCache.js";
import { READ_CACHE_MAX_BYTES, READ_CACHE_STALE_MS, READ_CACHE_TTL_MS } from "./limits.js";

export function createCatalog(
  db: Db,
  opts: { log: Logger; embedded: boolean; allowPrivateHosts: boolean },
): { cataloger: Cataloger; reader: CatalogReader } {
  const cache = new ReadCache<unknown>({
    ttlMs: READ_CACHE_TTL_MS,
    staleMs: READ_CACHE_STALE_MS,
    jitter: 0.2,
    maxBytes: READ_CACHE_MAX_BYTES,
    onBackgroundError: (e) => opts.log.warn({ err: String(e) }, "catalog read refresh failed"),
  });
  const cataloger = new Cataloger(db, opts.log, {
    allowPrivateHosts: opts.allowPrivateHosts,
    onChange: () => cache.invalidate(),
  });
  // One embedded connection: keep discovery to two queries at a time so
  // payment queries are never stuck behind a burst of searches.
  const reader = new CatalogReader(db, cache, opts.embedded ? 2 : 8);
  return { cataloger, reader };
}
