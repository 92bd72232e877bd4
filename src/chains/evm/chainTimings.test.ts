import { test } from "node:test";
import assert from "node:assert/strict";
import { chainTimings } from "./chainTimings.js";

test("every clock follows the block time it is given, down to its floors", () => {
  const cases: [blockTimeMs: number, expected: ReturnType<typeof chainTimings>][] = [
    // Base as the registry has it (2 s).
    [2_000, { pollMs: 250, receiptTickMs: 100, feeMaxAgeMs: 1_000, stuckAfterMs: 6_000 }],
    // The devnet's anvil at 1 s.
    [1_000, { pollMs: 125, receiptTickMs: 50, feeMaxAgeMs: 500, stuckAfterMs: 5_000 }],
    // A fast chain keeps the floors: 25 ms ticks, fees kept 250 ms, 5 s before a replacement.
    [250, { pollMs: 31, receiptTickMs: 25, feeMaxAgeMs: 250, stuckAfterMs: 5_000 }],
  ];
  for (const [blockTimeMs, expected] of cases) {
    assert.deepEqual(chainTimings(blockTimeMs), expected, `${blockTimeMs} ms blocks`);
  }
});

test("an explicit polling interval or stuck time wins over the derived ones", () => {
  const t = chainTimings(2_000, { pollingIntervalMs: 10, stuckAfterMs: 1_500 });
  assert.equal(t.pollMs, 10);
  assert.equal(t.receiptTickMs, 10);
  assert.equal(t.stuckAfterMs, 1_500);
  assert.equal(t.feeMaxAgeMs, 1_000);
});
