import { test } from "node:test";
import assert from "node:assert/strict";
import { decodeCursor, encodeCursor, searchScope } from "./searchCursor.js";

test("a cursor round-trips its offset within its own search", () => {
  const scope = searchScope([["weather"], null, null]);
  const cursor = encodeCursor(40, scope);
  assert.match(cursor, /^[A-Za-z0-9_-]+$/);
  assert.deepEqual(decodeCursor(cursor, scope, 1000), { ok: true, offset: 40 });
});

test("a cursor from another search, a forged one or garbage is refused", () => {
  const scope = searchScope([["weather"]]);
  const other = searchScope([["tides"]]);
  assert.match(
    (decodeCursor(encodeCursor(20, other), scope, 1000) as { reason: string }).reason,
    /different search/,
  );
  for (const bad of [
    "",
    "not base64!",
    Buffer.from("{}").toString("base64url"),
    Buffer.from(JSON.stringify({ v: 1, o: -5, s: scope })).toString("base64url"),
    Buffer.from(JSON.stringify({ v: 1, o: 1e9, s: scope })).toString("base64url"),
    Buffer.from(JSON.stringify({ v: 1, o: 1.5, s: scope })).toString("base64url"),
    Buffer.from(JSON.stringify({ v: 2, o: 20, s: scope })).toString("base64url"),
    "a".repeat(500),
  ]) {
    const checked = decodeCursor(bad, scope, 1000);
    assert.equal(checked.ok, false, bad);
    assert.match((checked as { reason: string }).reason, /not one this service issued/);
  }
});
