/**
 * The side-by-side tables: rows in family order whatever order the runs came
 * in, each cell this service's figure against the reference's with the ratio,
 * a family without a reference shows its own figures alone, the chain's
 * ceiling and the database's cost per settle where a run measured them, and
 * a row recorded before those existed shows dashes; and the
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
  // Two tables of two rows each, a blank line between them.
  assert.equal(table.length, 9);
  assert.equal(table[4], "");
  assert.match(
    table[2]!,
    /^\| Solana, embedded database \(closed loop, concurrency 100\) \| 728 vs 713 \(1\.02×\) \| 185\.8 vs 199\.4 \(0\.93×\) \| – \| – \| 452 \/ 610 vs 460 \/ 650 at 93\/s \| 2026-11-26 \|$/,
  );
  assert.match(
    table[3]!,
    /^\| Starknet \(closed loop, concurrency 100\) \| – \| 23\.2 \| – \| – \| 2,104 \/ 3,311 \| 2026-11-27 \|$/,
  );
  assert.match(
    table[7]!,
    /^\| Solana, embedded database \(closed loop, concurrency 100\) \| 1\.55 vs 1\.58 \(0\.98×\) \| 3\.72 vs 3\.59 \(1\.04×\) \| – \| – \| 290 vs 216 \(1\.34×\) \|$/,
  );
  assert.match(
    table[8]!,
    /^\| Starknet \(closed loop, concurrency 100\) \| – \| 28\.11 \| – \| – \| 310 \|$/,
  );
});

test("the chain's ceiling, settled over it, and the database's cost per settle where the run measured them", () => {
  const [, , rates, , , , costs] = summaryTable([
    {
      label: "EVM, PostgreSQL",
      settleShape: "closed loop, concurrency 500",
      date: "2026-12-02T00:00:00.000Z",
      ours: {
        settlePerSecond: 428.6,
        cpuMsPerSettle: 1.96,
        peakRssMb: 237,
        dbStatementsPerSettle: 0.161,
        dbRoundTripsPerSettle: 0.17,
        dbCpuMsPerSettle: 0.9,
      },
      reference: { settlePerSecond: 8.2, cpuMsPerSettle: 98.14, peakRssMb: 286 },
      chainCeilingPerSecond: 450,
    },
  ]).split("\n");
  assert.equal(
    rates,
    "| EVM, PostgreSQL (closed loop, concurrency 500) | – | 428.6 vs 8.2 (52.27×) | 450.0 | 0.95 | – | 2026-12-02 |",
  );
  assert.equal(
    costs,
    "| EVM, PostgreSQL (closed loop, concurrency 500) | – | 1.96 vs 98.14 (0.02×) | 0.90 | 0.16 / 0.17 | 237 vs 286 (0.83×) |",
  );
  const [, , unbounded, , , , counted] = summaryTable([
    {
      label: "XRP Ledger",
      settleShape: "closed loop, concurrency 100",
      date: "2026-12-02T00:00:00.000Z",
      ours: { settlePerSecond: 100.1, peakRssMb: 310, dbStatementsPerSettle: 0.32 },
      chainCeilingPerSecond: "unbounded",
    },
  ]).split("\n");
  assert.match(
    unbounded!,
    /^\| XRP Ledger \(closed loop, concurrency 100\) \| – \| 100\.1 \| unbounded \| – \|/,
  );
  // Statements without round trips: the one that was measured, and a dash.
  assert.match(counted!, /\| – \| 0\.32 \/ – \| 310 \|$/);
});

test("a row recorded before the ceiling and database columns existed reads as it did, with dashes", () => {
  // As bench/results/summary.json kept it before those figures were recorded.
  const recorded = JSON.parse(
    '[{"label":"NEAR","settleShape":"closed loop, concurrency 100","date":"2026-11-29T13:43:52.914Z","ours":{"settlePerSecond":31.476,"cpuMsPerSettle":11.18,"peakRssMb":311.0,"openSettleP50Ms":2596.1,"openSettleP99Ms":3139.8,"openRatePerSecond":15.7}}]',
  ) as SummaryRow[];
  const [, , rates, , , , costs] = summaryTable(recorded).split("\n");
  assert.equal(
    rates,
    "| NEAR (closed loop, concurrency 100) | – | 31.5 | – | – | 2,596 / 3,140 at 16/s | 2026-11-29 |",
  );
  assert.equal(costs, "| NEAR (closed loop, concurrency 100) | – | 11.18 | – | – | 311 |");
});

test("a figure a run could not measure shows as a dash, not as NaN or a ratio of it", () => {
  const [, , rates, , , , costs] = summaryTable([
    {
      label: "NEAR",
      settleShape: "closed loop, concurrency 100",
      date: "2026-11-27T00:00:00.000Z",
      // As JSON gives back a NaN or an Infinity that was written.
      ours: {
        settlePerSecond: 0,
        cpuMsPerSettle: null as unknown as number,
        peakRssMb: 300,
        dbCpuMsPerSettle: null as unknown as number,
      },
      reference: {
        settlePerSecond: 0,
        cpuMsPerSettle: Number.POSITIVE_INFINITY,
        peakRssMb: 200,
      },
      chainCeilingPerSecond: null as unknown as number,
    },
  ]).split("\n");
  assert.equal(rates, "| NEAR (closed loop, concurrency 100) | – | 0.0 | – | – | – | 2026-11-27 |");
  assert.equal(
    costs,
    "| NEAR (closed loop, concurrency 100) | – | – | – | – | 300 vs 200 (1.50×) |",
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
