/**
 * The side-by-side table: rows in family order whatever order the runs came
 * in, each cell this service's figure against the reference's with the ratio,
 * and a family without a reference shows its own figures alone; and the
 * warning a run gets when a rate fell more than 10% below the recorded one.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { belowRecorded, summaryTable, type SummaryRow } from "./summary.js";

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

describe("a run compared with the figures recorded for it", () => {
  const recorded: SummaryRow[] = [
    {
      label: "EVM, embedded database",
      settleShape: "closed loop, concurrency 200",
      date: "2026-11-27T00:57:00.000Z",
      ours: { verifyPerSecond: 1810, settlePerSecond: 198, peakRssMb: 330 },
      reference: { verifyPerSecond: 282, settlePerSecond: 1.8, peakRssMb: 281 },
      yardstickMs: 0.5,
    },
    {
      label: "NEAR",
      settleShape: "closed loop, concurrency 100",
      date: "2026-11-29T13:43:52.914Z",
      ours: { settlePerSecond: 31.5, peakRssMb: 311 },
    },
  ];
  const run = (label: string, ours: SummaryRow["ours"], extra: Partial<SummaryRow> = {}) => ({
    label,
    settleShape: "closed loop, concurrency 200",
    date: "2026-12-02T00:00:00.000Z",
    ours,
    ...extra,
  });

  test("a rate more than 10% below the recorded one is named with both figures and the drop", () => {
    const lines = belowRecorded(
      run(
        "EVM, embedded database",
        { verifyPerSecond: 1700, settlePerSecond: 150, peakRssMb: 300 },
        {
          yardstickMs: 0.75,
        },
      ),
      recorded,
    );
    assert.deepEqual(lines, [
      "WARNING: EVM, embedded database (closed loop, concurrency 200): settled per second 150.0 is 24.2% below the recorded 198.0 (2026-11-27, bench/results/summary.json) (machine: 0.750 ms per yardstick signature now, 0.500 when recorded)",
    ]);
  });

  test("a drop of 10% or less, a rise, and the reference's own figures say nothing", () => {
    const lines = belowRecorded(
      run(
        "EVM, embedded database",
        { verifyPerSecond: 1630, settlePerSecond: 250, peakRssMb: 900 },
        { reference: { verifyPerSecond: 1, settlePerSecond: 0.1, peakRssMb: 1 } },
      ),
      recorded,
    );
    assert.deepEqual(lines, []);
  });

  test("every rate that fell is named, and a machine speed recorded on one side only is said so", () => {
    const lines = belowRecorded(
      run(
        "EVM, embedded database",
        { verifyPerSecond: 900, settlePerSecond: 99, peakRssMb: 300 },
        { yardstickMs: undefined },
      ),
      recorded,
    );
    assert.equal(lines.length, 2);
    assert.match(lines[0]!, /settled per second 99\.0 is 50\.0% below the recorded 198\.0/);
    assert.match(
      lines[1]!,
      /valid verifications per second 900\.0 is 50\.3% below the recorded 1,810\.0/,
    );
    assert.doesNotMatch(lines[0]!, /machine/);
    const near = belowRecorded(
      {
        ...run("NEAR", { settlePerSecond: 20, peakRssMb: 300 }, { yardstickMs: 0.6 }),
        settleShape: "closed loop, concurrency 100",
      },
      recorded,
    );
    assert.match(
      near[0]!,
      /\(machine: 0\.600 ms per yardstick signature now; none recorded then\)$/,
    );
  });

  test("another scenario, a run never recorded, or a figure not measured is not compared", () => {
    const slow = { verifyPerSecond: 1, settlePerSecond: 1, peakRssMb: 300 };
    assert.deepEqual(
      belowRecorded(
        { ...run("EVM, embedded database", slow), settleShape: "closed loop, concurrency 500" },
        recorded,
      ),
      [],
    );
    assert.deepEqual(belowRecorded(run("EVM, PostgreSQL", slow), recorded), []);
    assert.deepEqual(
      belowRecorded(
        run("EVM, embedded database", {
          settlePerSecond: null as unknown as number,
          peakRssMb: 300,
        }),
        recorded,
      ),
      [],
    );
  });
});
