/**
 * The catalog's documented limits and defaults, in one place: what a stored
 * entry may hold, how pages are sized, and what the read filters accept.
 * The README's "Discovery catalog" section repeats these numbers.
 */

/** Resource URLs: http or https, at most this many characters. */
export const MAX_RESOURCE_URL_LENGTH = 2048;
/** `resource.description`; longer is refused, not truncated. */
export const MAX_DESCRIPTION_LENGTH = 1024;
export const MAX_MIME_TYPE_LENGTH = 128;
/** The serialized `extensions.bazaar` declaration (info + schema). */
export const MAX_DECLARATION_BYTES = 16 * 1024;
/** One payment kind (`accepts` entry), serialized, `extra` included. */
export const MAX_ACCEPT_BYTES = 2 * 1024;
/** Payment kinds remembered per resource; the most recently paid are kept. */
export const MAX_ACCEPTS_PER_RESOURCE = 8;
/** Extension keys remembered per resource (for the `extensions` filter). */
export const MAX_EXTENSION_KEYS = 16;

/** Page sizes, for both /discovery/resources and /discovery/search. */
export const DEFAULT_PAGE_LIMIT = 20;
export const MAX_PAGE_LIMIT = 100;
/** Deepest offset a list page may start at. */
export const MAX_OFFSET = 1_000_000;
/** Search queries, in characters. */
export const MAX_QUERY_LENGTH = 256;
/** Extension keys in one `extensions` filter (comma-separated). */
export const MAX_FILTER_EXTENSIONS = 8;

/** Resource types the bazaar extension defines. */
export const RESOURCE_TYPES = ["http", "mcp"] as const;
export type ResourceType = (typeof RESOURCE_TYPES)[number];

/** Payment schemes of x402 v2 that the `scheme` filter accepts. */
export const PAYMENT_SCHEMES = ["exact", "upto", "batch-settlement"] as const;

/**
 * A /verify for a declaration that was cataloged with identical content this
 * recently is answered from memory: /verify is free and may be called any
 * number of times, so it must not turn into a database write per call.
 * /settle always writes (it is the refresh).
 */
export const VERIFY_REFRESH_INTERVAL_MS = 60_000;
/**
 * How long /verify or /settle waits for the catalog write. Past this the
 * answer goes out with `status: "processing"` and the write finishes alone.
 */
export const CATALOG_WRITE_BUDGET_MS = 250;

/**
 * Public reads are cached: fresh for READ_CACHE_TTL_MS, then served for up
 * to READ_CACHE_STALE_MS more while one background query refreshes them. A
 * new or changed entry clears this replica's cache at once; refreshes of
 * unchanged entries (their `lastUpdated`) and other replicas' writes show
 * within the sum.
 */
export const READ_CACHE_TTL_MS = 5_000;
export const READ_CACHE_STALE_MS = 25_000;
/** Memory the read cache may hold, measured as serialized JSON. */
export const READ_CACHE_MAX_BYTES = 32 * 1024 * 1024;

/**
 * Ownership proofs and staleness (ownershipChecker.ts, docs/discovery.md
 * "Who owns an entry"). Each entry is fetched once per PROOF_RECHECK_MS
 * while its resource answers 402, once per PROOF_RETRY_MS while it does not;
 * an entry whose resource has not answered 402 for STALE_AFTER_MS (counted
 * from its last 402, or from when it was cataloged) is stale and leaves the
 * listing until it answers again.
 */
export const PROOF_RECHECK_MS = 6 * 60 * 60_000;
export const PROOF_RETRY_MS = 60 * 60_000;
export const STALE_AFTER_MS = 24 * 60 * 60_000;
/** One fetch of a resource (or of its challenge file) may take this long. */
export const PROOF_TIMEOUT_MS = 5_000;
/** Bytes of a 402 body (or of a challenge file) read at most. */
export const PROOF_MAX_BYTES = 64 * 1024;
/** Entries checked per pass of the worker. */
export const PROOF_BATCH_SIZE = 10;
/** Claims on one entry looked at per check (the oldest first). */
export const PROOF_MAX_CLAIMS = 10;
/** An account's own settlements searched for a payTo: its latest this many. */
export const PROOF_SETTLEMENTS_SCANNED = 10_000;
