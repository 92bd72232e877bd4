import { test } from "node:test";
import assert from "node:assert/strict";
import { chainTimings } from "./chainTimings.js";

test("every clock follows the block time it is given", () => {
  // Base as the registry has it (2 s), and the devnet's anvil at 1 s.
  assert.deepEqual(chainTimings(2_000), {
    pollMs: 250,
    receiptTickMs: 100,
    feeMaxAgeMs: 1_000,
    stuckAfterMs: 6_000,
  });
  assert.deepEqual(chainTimings(1_000), {
    pollMs: 125,
    receiptTickMs: 50,
    feeMaxAgeMs: 500,
    stuckAfterMs: 5_000,
  });
});

test("fast chains keep the floors: 25 ms ticks, fees kept 250 ms, 5 s before a replacement", () => {
  assert.deepEqual(chainTimings(250), {
    pollMs: 31,
    receiptTickMs: 25,
    feeMaxAgeMs: 250,
    stuckAfterMs: 5_000,
  });
});

test("an explicit polling interval or stuck time wins over the derived ones", () => {
  const t = chainTimings(2_000, { pollingIntervalMs: 10, stuckAfterMs: 1_500 });
  assert.equal(t.pollMs, 10);
  assert.equal(t.receiptTickMs, 10);
  assert.equal(t.stuckAfterMs, 1_500);
  assert.equal(t.feeMaxAgeMs, 1_000);
});
