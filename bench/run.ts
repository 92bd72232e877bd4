/**
 * `npm run bench`: every benchmark, side by side with its reference, in one
 * run. Results go to stdout and to bench/results/.
 *
 *   npm run bench                 # full: 30 s verify, 2,000 settles (concurrency 200; 500 on PostgreSQL)
 *   BENCH_QUICK=1 npm run bench   # a short smoke run
 *   BENCH_DATABASE_URL=postgres://… npm run bench   # this service on PostgreSQL
 *   BENCH_ONLY=<name> npm run bench  # one benchmark: a side-by-side one (a folder bench/<name>/ with sideBySide.ts), or a namespace with a bench in devnet/families.ts
 *   BENCH_CPU_PROFILE_DIR=dir     # keep the servers' CPU profiles (some benches always take them)
 *   BENCH_CPU_PROFILE_INTERVAL_US=1000   # sample more often than every 5 ms, where a bench profiles
 *
 * Both servers run compiled (`npm run build` first), as in production. A
 * full run also writes its family's row of the side-by-side table in
 * docs/benchmarks.md (bench/summary.ts). Every run first measures the
 * machine's speed (bench/yardstick.ts), which each report states beside its
 * figures, and warns of a rate more than 10% below the one recorded for the
 * same run and scenario (quick runs too: they are compared, not recorded).
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { compareAndRecord, type SummaryRow } from "./summary.js";
import { measureYardstick, yardstickLine } from "./yardstick.js";
import { percentile } from "./load.js";
import { runSideBySide, settledPerSecond, sideBySideBenches } from "./sideBySide.js";
import {
  BENCHED_FAMILIES,
  familyProblems,
  familyTable,
  ledgerCeiling,
  runFamilyBench,
  warmUpCount,
  type FamilyName,
  type FamilyResult,
} from "./families.js";

const quick = process.env["BENCH_QUICK"] === "1";
const say = (line: string) => process.stderr.write(`${line}\n`);

const databaseUrl = process.env["BENCH_DATABASE_URL"] || undefined;
say("building dist/ (npm run build)…");
execFileSync("npm", ["run", "--silent", "build"], { stdio: ["ignore", "ignore", "inherit"] });

const only = process.env["BENCH_ONLY"];
const SIDE_BY_SIDE = sideBySideBenches();
const BENCHES: string[] = [...SIDE_BY_SIDE, ...BENCHED_FAMILIES];
if (only !== undefined && !BENCHES.includes(only)) {
  say(`BENCH_ONLY must be one of ${BENCHES.join(", ")} (got "${only}")`);
  process.exit(2);
}
mkdirSync("bench/results", { recursive: true });

const today = new Date().toISOString();
// The machine's speed, before anything else runs on it: beside every figure.
const yardstick = await measureYardstick();
say(yardstickLine(yardstick));
for (const name of SIDE_BY_SIDE) {
  if (only === undefined || only === name)
    await runSideBySide(name, { quick, databaseUrl, say, today, yardstick });
}
for (const family of BENCHED_FAMILIES) {
  if (only === undefined || only === family) await familyBench(family);
}

async function familyBench(name: FamilyName): Promise<void> {
  const settleCount = quick ? 100 : 1_000;
  const result: FamilyResult = await runFamilyBench(name, {
    settleCount,
    concurrency: 100,
    progress: say,
  });
  const report = [
    `# ${result.title} facilitator benchmark`,
    ``,
    `${new Date().toISOString()} · ${cpus().length} cores (${cpus()[0]?.model ?? "?"}) · Node ${process.version}`,
    yardstickLine(yardstick),
    `This service alone (no official facilitator exists for ${result.title}), compiled, embedded PGlite, metering and`,
    `per-key rate limits on (max plan, above the load), only ${result.network} configured. On a ${result.setup}.`,
    `The ledger runs inside the bench's own process (NEAR on the load generator's thread, XRPL and Starknet on threads of`,
    `their own); the machine is shared, and other work may run on it at the same time, so the figures are noisy.`,
    `The service is first warmed up with ${warmUpCount({ settleCount, concurrency: 100 })} settles in a closed loop, not measured.`,
    `${settleCount.toLocaleString("en-US")} distinct payments signed with this project's client scheme before the run, POSTed to /settle at`,
    `concurrency 100 (a closed loop: a worker sends its next payment when the last one is answered), then as many`,
    `again arriving at half the closed loop's rate whether or not earlier ones were answered (open arrivals;`,
    `latency counts from each payment's due time).`,
    ``,
    familyTable([result]),
  ].join("\n");
  writeFileSync(`bench/results/${name}${quick ? "-quick" : ""}.md`, report);
  process.stdout.write(`\n${report}`);
  const problems = familyProblems(result);
  const row: SummaryRow = {
    label: result.title,
    settleShape: "closed loop, concurrency 100",
    date: today,
    ours: {
      settlePerSecond: settledPerSecond(result.settle),
      cpuMsPerSettle: result.settleCpuMs,
      peakRssMb: result.peakRssMb,
      openSettleP50Ms: percentile(result.open.settle.latenciesMs, 50),
      openSettleP99Ms: percentile(result.open.settle.latenciesMs, 99),
      openRatePerSecond: result.open.ratePerSecond,
      dbStatementsPerSettle: result.dbPerSettle?.statements,
      dbRoundTripsPerSettle: result.dbPerSettle?.roundTrips,
      dbCpuMsPerSettle: result.dbCpuMsPerSettle,
    },
    yardstickMs: yardstick.msPerSignature,
    chainCeilingPerSecond: ledgerCeiling(result),
  };
  // A run whose payments or records do not add up does not stand in the table.
  await compareAndRecord(row, { quick, say, stands: problems.length === 0 });
  if (problems.length > 0) {
    // After the report is written: the figures show what went wrong.
    for (const p of problems) say(`FAILED: ${p}`);
    process.exitCode = 1;
  }
}
