import { describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  FREE_PLAN_LIMIT,
  PAYG_FREE_UNITS,
  monthOf,
  paygBillableUnits,
  planRule,
  usdOf,
} from "./plans.js";

describe("plans", () => {
  const limits = { starterLimit: 10_000, proLimit: 100_000, maxLimit: 1_000_000 };

  test("free is 10 a month; starter, pro and max come from config; payg has no hard cap", () => {
    assert.equal(planRule("free", limits).hardLimit, FREE_PLAN_LIMIT);
    assert.equal(FREE_PLAN_LIMIT, 10);
    assert.equal(planRule("starter", limits).hardLimit, 10_000);
    assert.equal(planRule("pro", limits).hardLimit, 100_000);
    assert.equal(planRule("max", { ...limits, maxLimit: 7 }).hardLimit, 7);
    assert.equal(planRule("payg", limits).hardLimit, null);
    assert.equal(planRule("payg", limits).reportedLimit, PAYG_FREE_UNITS);
    assert.equal(planRule("unknown", limits).name, "free");
  });

  test("the month is the calendar month in UTC", () => {
    assert.equal(monthOf(new Date("2026-01-31T23:59:59.999Z")), "2026-01");
    assert.equal(monthOf(new Date("2026-02-01T00:00:00.000Z")), "2026-02");
    // 23:30 on Jan 31 in UTC-5 is already February in UTC.
    assert.equal(monthOf(new Date("2026-01-31T23:30:00-05:00")), "2026-02");
  });

  test("pay-as-you-go charges only units beyond the first 1,000 of the month", () => {
    assert.equal(paygBillableUnits(0, 1), 0);
    assert.equal(paygBillableUnits(999, 1000), 0);
    assert.equal(paygBillableUnits(1000, 1001), 1);
    assert.equal(paygBillableUnits(998, 1003), 3);
  });

  test("micro-USD reads as dollars: two decimals, more only when they carry something", () => {
    assert.equal(usdOf(5_000_000), "5.00");
    assert.equal(usdOf(399_000_000n), "399.00");
    assert.equal(usdOf("1000"), "0.001");
    assert.equal(usdOf(2_500_000), "2.50");
    assert.equal(usdOf(-1000), "-0.001");
    assert.equal(usdOf(0), "0.00");
  });
});
