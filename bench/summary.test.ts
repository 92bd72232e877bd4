/**
 * The side-by-side table: rows in family order whatever order the runs came
 * in, each cell this service's figure against the reference's with the ratio,
 * and a family without a reference shows its own figures alone.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { summaryTable } from "./summary.js";

test("rows come in family order, with the reference and the ratio where there is one", () => {
  const table = summaryTable([
    {
      label: "Starknet",
      settleShape: "closed loop, concurrency 100",
      date: "2026-11-27T00:00:00.000Z",
      ours: {
        settlePerSecond: 23.2,
        cpuMsPerSettle: 28.11,
        peakRssMb: 310,
        openSettleP50Ms: 2104.4,
        openSettleP99Ms: 3311,
      },
    },
    {
      label: "Solana, embedded database",
      settleShape: "closed loop, concurrency 100",
      date: "2026-11-26T00:00:00.000Z",
      ours: {
        verifyPerSecond: 728,
        settlePerSecond: 185.8,
        cpuMsPerVerify: 1.55,
        cpuMsPerSettle: 3.72,
        peakRssMb: 290,
        openSettleP50Ms: 452,
        openSettleP99Ms: 610,
        openRatePerSecond: 92.9,
      },
      reference: {
        verifyPerSecond: 713,
        settlePerSecond: 199.4,
        cpuMsPerVerify: 1.58,
        cpuMsPerSettle: 3.59,
        peakRssMb: 216,
        openSettleP50Ms: 460,
        openSettleP99Ms: 650,
      },
    },
  ]).split("\n");
  assert.equal(table.length, 4);
  assert.match(
    table[2]!,
    /^\| Solana, embedded database \(closed loop, concurrency 100\) \| 728 vs 713 \(1\.02×\) \| 185\.8 vs 199\.4 \(0\.93×\) \| 452 \/ 610 vs 460 \/ 650 at 93\/s \| 1\.55 vs 1\.58 \(0\.98×\) \| 3\.72 vs 3\.59 \(1\.04×\) \| 290 vs 216 \(1\.34×\) \| 2026-11-26 \|$/,
  );
  assert.match(
    table[3]!,
    /^\| Starknet \(closed loop, concurrency 100\) \| – \| 23\.2 \| 2,104 \/ 3,311 \| – \| 28\.11 \| 310 \| 2026-11-27 \|$/,
  );
});

test("a figure a run could not measure shows as a dash, not as NaN or a ratio of it", () => {
  const [, , row] = summaryTable([
    {
      label: "NEAR",
      settleShape: "closed loop, concurrency 100",
      date: "2026-11-27T00:00:00.000Z",
      // As JSON gives back a NaN or an Infinity that was written.
      ours: { settlePerSecond: 0, cpuMsPerSettle: null as unknown as number, peakRssMb: 300 },
      reference: {
        settlePerSecond: 0,
        cpuMsPerSettle: Number.POSITIVE_INFINITY,
        peakRssMb: 200,
      },
    },
  ]).split("\n");
  assert.equal(
    row,
    "| NEAR (closed loop, concurrency 100) | – | 0.0 | – | – | – | 300 vs 200 (1.50×) | 2026-11-27 |",
  );
});
