import { test } from "node:test";
import assert from "node:assert/strict";
import { rememberBounded } from "./boundedMap.js";

test("a bounded map keeps the newest entries, and setting a key again makes it the newest", () => {
  const map = new Map<string, number>();
  rememberBounded(map, "a", 1, 2);
  rememberBounded(map, "b", 2, 2);
  rememberBounded(map, "a", 3, 2);
  rememberBounded(map, "c", 4, 2);
  assert.deepEqual(
    [...map],
    [
      ["a", 3],
      ["c", 4],
    ],
  );
});
