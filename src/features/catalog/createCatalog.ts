/**
 * The discovery catalog's writer (behind valid payments), its cached reader
 * sized for the database it runs on, the ownership checker the background
 * worker runs (proofs and staleness, never on the payment path), and the
 * dashboard's view of an account's entries and claims.
 */
import type { Db } from "../../storage/db.js";
import type { Logger } from "../../lib/logger.js";
import { Cataloger } from "./cataloger.js";
import { CatalogReader } from "./catalogReader.js";
import { OwnershipChecker } from "./ownershipChecker.js";
import { CatalogOwnership } from "./ownershipView.js";
import { ReadCache } from "./readCache.js";
import { READ_CACHE_MAX_BYTES, READ_CACHE_STALE_MS, READ_CACHE_TTL_MS } from "./limits.js";

export interface CatalogFeature {
  cataloger: Cataloger;
  reader: CatalogReader;
  ownership: OwnershipChecker;
  view: CatalogOwnership;
  /** Drops the cached discovery answers (what the checker does when the listing changes). */
  invalidateReads(): void;
}

export function createCatalog(
  db: Db,
  opts: { log: Logger; embedded: boolean; allowPrivateHosts: boolean },
): CatalogFeature {
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
  // Resources are fetched through the webhooks' SSRF guard; private and
  // loopback targets only where the catalog takes their URLs (devnet mode).
  const ownership = new OwnershipChecker(db, {
    allowPrivateTargets: opts.allowPrivateHosts,
    log: opts.log,
    onChange: () => cache.invalidate(),
  });
  return {
    cataloger,
    reader,
    ownership,
    view: new CatalogOwnership(db),
    invalidateReads: () => cache.invalidate(),
  };
}
