/**
 * The hourly failed-gas budget: reverted fees and in-flight worst cases add
 * up against it; a transaction that would pass it is refused; failures age
 * out after an hour, and a transaction that succeeded gives its hold back;
 * the failures every replica journaled count too.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { FailedGasBudget, FailedGasBudgetSpentError } from "./failedGasBudget.js";

test("in-flight holds and reverted fees count; success gives the hold back; failures age out", () => {
  let now = 1_000_000;
  const budget = new FailedGasBudget("eip155:8453", 1_000n, () => now);
  const a = budget.reserve(600n);
  // A second in flight would pass the budget before either is known to fail.
  assert.throws(() => budget.reserve(500n), FailedGasBudgetSpentError);
  budget.finish(a, false, 300n); // succeeded: nothing counts
  const b = budget.reserve(600n);
  budget.finish(b, true, 700n); // reverted: its fee counts for the hour
  assert.equal(budget.spent(), 700n);
  assert.throws(
    () => budget.reserve(400n),
    (e) => e instanceof FailedGasBudgetSpentError && e.retryAfterSeconds === 3600,
  );
  budget.finish(budget.reserve(300n), false, 0n);
  now += 60 * 60 * 1000;
  assert.equal(budget.spent(), 0n, "an hour later the failure no longer counts");
  budget.reserve(1_000n);
});

test("no budget: nothing is refused", () => {
  const budget = new FailedGasBudget("eip155:8453", undefined);
  budget.reserve(10n ** 30n);
  budget.reserve(10n ** 30n);
});

test("the failures every replica journaled count, read at start; this process's own count where it is higher", async () => {
  const now = 1_000_000;
  let journaled = 900n;
  const asked: Date[] = [];
  const budget = new FailedGasBudget(
    "eip155:8453",
    1_000n,
    () => now,
    (since) => {
      asked.push(since);
      return Promise.resolve(journaled);
    },
  );
  await budget.refresh();
  assert.equal(asked[0]?.getTime(), now - 60 * 60 * 1000, "the hour before now");
  assert.equal(budget.spent(), 900n, "another replica's failures count here");
  assert.throws(() => budget.reserve(200n), FailedGasBudgetSpentError);
  budget.finish(budget.reserve(50n), false, 0n);

  // This process's failure, before the journal's figure has seen it.
  journaled = 0n;
  await budget.refresh();
  budget.finish(budget.reserve(100n), true, 950n);
  assert.equal(budget.spent(), 950n);
  assert.throws(() => budget.reserve(100n), FailedGasBudgetSpentError);

  // A failed read keeps the last figure.
  const failing = new FailedGasBudget(
    "eip155:8453",
    1_000n,
    () => now,
    () => Promise.reject(new Error("database down")),
  );
  await failing.refresh();
  assert.equal(failing.spent(), 0n);
});
