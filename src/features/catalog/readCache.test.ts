import { test } from "node:test";
import assert from "node:assert/strict";
import { ReadCache } from "./readCache.js";

function clock() {
  let t = 0;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

test("a value is served from memory until it expires", async () => {
  const c = clock();
  const cache = new ReadCache<number>({ ttlMs: 1000, maxBytes: 1 << 20, now: c.now });
  let loads = 0;
  const load = async () => ++loads;
  assert.equal(await cache.get("k", load), 1);
  c.advance(999);
  assert.equal(await cache.get("k", load), 1);
  c.advance(1);
  assert.equal(await cache.get("k", load), 2);
  assert.equal(loads, 2);
});

test("concurrent misses for one key share one load", async () => {
  const cache = new ReadCache<string>({ ttlMs: 1000, maxBytes: 1 << 20 });
  let loads = 0;
  let release!: (v: string) => void;
  const load = () => {
    loads++;
    return new Promise<string>((r) => (release = r));
  };
  const a = cache.get("k", load);
  const b = cache.get("k", load);
  release("v");
  assert.deepEqual(await Promise.all([a, b]), ["v", "v"]);
  assert.equal(loads, 1);
});

test("invalidate drops entries, and a load begun before it is not stored", async () => {
  const cache = new ReadCache<string>({ ttlMs: 60_000, maxBytes: 1 << 20 });
  await cache.get("a", async () => "old");
  let release!: (v: string) => void;
  const inFlight = cache.get("b", () => new Promise<string>((r) => (release = r)));
  cache.invalidate();
  release("stale");
  assert.equal(await inFlight, "stale");
  assert.equal(cache.size, 0);
  assert.equal(await cache.get("a", async () => "new"), "new");
});

test("failed loads are not cached", async () => {
  const cache = new ReadCache<string>({ ttlMs: 60_000, maxBytes: 1 << 20 });
  await assert.rejects(
    cache.get("k", async () => {
      throw new Error("db down");
    }),
    /db down/,
  );
  assert.equal(await cache.get("k", async () => "ok"), "ok");
});

test("memory is bounded: least recently used entries go first", async () => {
  // Each value serializes to 102 bytes; the budget holds four.
  const cache = new ReadCache<string>({ ttlMs: 60_000, maxBytes: 420 });
  const value = "x".repeat(100);
  for (const k of ["a", "b", "c", "d"]) await cache.get(k, async () => value);
  await cache.get("a", async () => "reloaded"); // touch a: b is now oldest
  await cache.get("e", async () => value);
  assert.equal(cache.size, 4);
  let reloaded = false;
  await cache.get("b", async () => {
    reloaded = true;
    return value;
  });
  assert.equal(reloaded, true, "b was evicted");
  assert.equal(await cache.get("a", async () => "fresh"), value);
});

test("a zero TTL disables caching", async () => {
  const cache = new ReadCache<number>({ ttlMs: 0, maxBytes: 1 << 20 });
  let loads = 0;
  await cache.get("k", async () => ++loads);
  await cache.get("k", async () => ++loads);
  assert.equal(loads, 2);
  assert.equal(cache.size, 0);
});

test("past its ttl an entry is served stale while one background load replaces it", async () => {
  const c = clock();
  const cache = new ReadCache<string>({
    ttlMs: 1000,
    staleMs: 5000,
    maxBytes: 1 << 20,
    now: c.now,
  });
  await cache.get("k", async () => "v1");
  c.advance(1500);
  let loads = 0;
  let release!: (v: string) => void;
  const reload = () => {
    loads++;
    return new Promise<string>((r) => (release = r));
  };
  assert.equal(await cache.get("k", reload), "v1", "stale value, no wait");
  assert.equal(await cache.get("k", reload), "v1", "still stale while loading");
  assert.equal(loads, 1, "one background load");
  release("v2");
  await new Promise((r) => setImmediate(r));
  assert.equal(await cache.get("k", reload), "v2");
  assert.equal(loads, 1);

  c.advance(6001); // past fresh + stale: the caller waits for a load
  assert.equal(await cache.get("k", async () => "v3"), "v3");
});

test("a failed background load is reported and the stale entry stays", async () => {
  const c = clock();
  const errors: unknown[] = [];
  const cache = new ReadCache<string>({
    ttlMs: 1000,
    staleMs: 5000,
    maxBytes: 1 << 20,
    now: c.now,
    onBackgroundError: (e) => errors.push(e),
  });
  await cache.get("k", async () => "v1");
  c.advance(1500);
  assert.equal(
    await cache.get("k", async () => {
      throw new Error("db down");
    }),
    "v1",
  );
  await new Promise((r) => setImmediate(r));
  assert.equal(errors.length, 1);
  assert.equal(await cache.get("k", async () => "v2"), "v1", "retry runs in the background");
  await new Promise((r) => setImmediate(r));
  assert.equal(await cache.get("k", async () => "v3"), "v2");
});

test("jitter spreads expiry within its bounds", async () => {
  const c = clock();
  const cache = new ReadCache<number>({ ttlMs: 1000, jitter: 0.2, maxBytes: 1 << 20, now: c.now });
  for (let i = 0; i < 50; i++) await cache.get(`k${i}`, async () => i);
  c.advance(799);
  let reloads = 0;
  for (let i = 0; i < 50; i++) await cache.get(`k${i}`, async () => (reloads++, i));
  assert.equal(reloads, 0, "none expires before 80% of ttl");
  c.advance(402);
  for (let i = 0; i < 50; i++) await cache.get(`k${i}`, async () => (reloads++, i));
  assert.equal(reloads, 50, "all expire by 120% of ttl");
});
