import { test } from "node:test";
import assert from "node:assert/strict";
import { limitHeapGrowth } from "./heapGrowth.js";

test("the heap growth limit is set unless the operator gave node their own", () => {
  assert.equal(limitHeapGrowth(["--heap-growing-percent=80"]), false);
  assert.equal(limitHeapGrowth(["--enable-source-maps", "--heap_growing_percent=20"]), false);
  assert.equal(limitHeapGrowth(["--enable-source-maps"]), true);
  assert.equal(limitHeapGrowth([]), true);
});
