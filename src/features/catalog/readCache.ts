/**
 * A small in-process cache for the public catalog reads.
 *
 * Discovery is read far more often than it changes, and the embedded
 * database runs every query on the one JavaScript thread, so repeated pages
 * are answered from memory:
 * - an entry is fresh for `ttlMs` (spread by `jitter` so entries filled
 *   together do not expire together);
 * - for `staleMs` after that it is still served while one background load
 *   replaces it, so popular pages never wait for the database;
 * - identical concurrent misses share one load;
 * - memory is bounded by the serialized size of what is kept, least
 *   recently used first out.
 * `invalidate()` drops everything at once: the cataloger calls it when an
 * entry is added or its content changes, so a new resource is visible
 * immediately on this replica. Other replicas see it within ttl + stale.
 */

interface Entry<V> {
  value: V;
  bytes: number;
  freshUntil: number;
  staleUntil: number;
}

export interface ReadCacheOptions {
  ttlMs: number;
  /** How long past its ttl an entry may be served while it is reloaded. */
  staleMs?: number;
  maxBytes: number;
  /** Fraction of ttl by which each entry's freshness is randomly shortened or lengthened. */
  jitter?: number;
  now?: () => number;
  /** A background reload failed (the stale entry stays until it expires). */
  onBackgroundError?: (e: unknown) => void;
}

export class ReadCache<V> {
  private readonly entries = new Map<string, Entry<V>>();
  private readonly loading = new Map<string, Promise<V>>();
  private bytes = 0;
  private generation = 0;
  private readonly now: () => number;

  constructor(private readonly opts: ReadCacheOptions) {
    this.now = opts.now ?? Date.now;
  }

  get size(): number {
    return this.entries.size;
  }

  invalidate(): void {
    this.generation++;
    this.entries.clear();
    this.loading.clear();
    this.bytes = 0;
  }

  async get(key: string, load: () => Promise<V>): Promise<V> {
    if (this.opts.ttlMs <= 0) return load();
    const hit = this.entries.get(key);
    const now = this.now();
    if (hit && now < hit.staleUntil) {
      // Re-insert: Map order is the LRU order.
      this.entries.delete(key);
      this.entries.set(key, hit);
      if (now >= hit.freshUntil && !this.loading.has(key)) {
        this.load(key, load).catch((e: unknown) => this.opts.onBackgroundError?.(e));
      }
      return hit.value;
    }
    if (hit) this.remove(key);
    return this.loading.get(key) ?? this.load(key, load);
  }

  private load(key: string, load: () => Promise<V>): Promise<V> {
    const generation = this.generation;
    const promise = load().then(
      (value) => {
        if (this.generation === generation) {
          this.loading.delete(key);
          this.store(key, value);
        }
        return value;
      },
      (e: unknown) => {
        if (this.generation === generation) this.loading.delete(key);
        throw e;
      },
    );
    this.loading.set(key, promise);
    return promise;
  }

  private store(key: string, value: V): void {
    const bytes = Buffer.byteLength(JSON.stringify(value) ?? "", "utf8");
    this.remove(key);
    if (bytes > this.opts.maxBytes / 4) return;
    const jitter = this.opts.jitter ?? 0;
    const ttl = this.opts.ttlMs * (1 + jitter * (2 * Math.random() - 1));
    const now = this.now();
    this.entries.set(key, {
      value,
      bytes,
      freshUntil: now + ttl,
      staleUntil: now + ttl + (this.opts.staleMs ?? 0),
    });
    this.bytes += bytes;
    for (const oldest of this.entries.keys()) {
      if (this.bytes <= this.opts.maxBytes) break;
      this.remove(oldest);
    }
  }

  private remove(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.bytes -= entry.bytes;
  }
}
