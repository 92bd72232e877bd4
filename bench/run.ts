/**
 * `npm run bench`: every benchmark, side by side with its reference, in one
 * run. Results go to stdout and to bench/results/.
 *
 *   npm run bench                 # full: 30 s verify, 2,000 settles (concurrency 200; 500 on PostgreSQL)
 *   BENCH_QUICK=1 npm run bench   # a short smoke run
 *   BENCH_DATABASE_URL=postgres://… npm run bench   # this service on PostgreSQL
 *   BENCH_ONLY=svm npm run bench  # one family (evm, svm, or a namespace with a bench in devnet/families.ts)
 *   BENCH_CPU_PROFILE_DIR=dir     # keep the servers' CPU profiles (the EVM bench always takes them)
 *   BENCH_CPU_PROFILE_INTERVAL_US=1000   # EVM: sample more often than every 5 ms
 *
 * Both servers run compiled (`npm run build` first), as in production. A
 * full run also writes its family's row of the side-by-side table in
 * docs/benchmarks.md (bench/summary.ts).
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { evmTable, runEvmBench } from "./evm.js";
import { cpuSection } from "./profileReport.js";
import { evmTargets, targetsTable } from "./targets.js";
import { runSvmBench, svmTable } from "./svm.js";
import { recordSummary } from "./summary.js";
import { validPerSecond } from "./harness.js";
import { percentile, type LoadResult } from "./load.js";
import {
  BENCHED_FAMILIES,
  familyProblems,
  familyTable,
  runFamilyBench,
  type FamilyName,
  type FamilyResult,
} from "./families.js";

const quick = process.env["BENCH_QUICK"] === "1";
const say = (line: string) => process.stderr.write(`${line}\n`);

const databaseUrl = process.env["BENCH_DATABASE_URL"] || undefined;
say("building dist/ (npm run build)…");
execFileSync("npm", ["run", "--silent", "build"], { stdio: ["ignore", "ignore", "inherit"] });

const only = process.env["BENCH_ONLY"];
const BENCHES: string[] = ["evm", "svm", ...BENCHED_FAMILIES];
if (only !== undefined && !BENCHES.includes(only)) {
  say(`BENCH_ONLY must be one of ${BENCHES.join(", ")} (got "${only}")`);
  process.exit(2);
}
mkdirSync("bench/results", { recursive: true });

const settledPerSecond = (r: LoadResult) => (r.outcomes.get("settled") ?? 0) / r.seconds;
const today = new Date().toISOString();
if (only === undefined || only === "evm") await evmBench();
if (only === undefined || only === "svm") await svmBench();
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
    `This service alone (no official facilitator exists for ${result.title}), compiled, embedded PGlite, metering and`,
    `per-key rate limits on (max plan, above the load), only ${result.network} configured. On a ${result.setup}.`,
    `The ledger runs inside the bench's own process, beside the load generator; the machine is shared, and other`,
    `work may run on it at the same time, so the figures are noisy.`,
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
  // A run whose payments or records do not add up does not stand in the table.
  if (!quick && problems.length === 0) {
    await recordSummary({
      label: result.title,
      settleShape: "closed loop, concurrency 100",
      date: today,
      ours: {
        settlePerSecond: settledPerSecond(result.settle),
        cpuMsPerSettle: result.settleCpuMs,
        peakRssMb: result.peakRssMb,
        openSettleP50Ms: percentile(result.open.settle.latenciesMs, 50),
        openSettleP99Ms: percentile(result.open.settle.latenciesMs, 99),
      },
    });
  }
  if (problems.length > 0) {
    // After the report is written: the figures show what went wrong.
    for (const p of problems) say(`FAILED: ${p}`);
    process.exitCode = 1;
  }
}

async function svmBench(): Promise<void> {
  const { ours, reference } = await runSvmBench({
    verifySeconds: quick ? 6 : 21,
    verifyRounds: 3,
    verifyWarmupSeconds: quick ? 1 : 3,
    // Above what either server verifies in a 7 s round (up to about 750 a second).
    verifyPayloadsPerRun: quick ? 1_500 : 6_000,
    settleCount: quick ? 200 : 1_000,
    concurrency: 100,
    databaseUrl,
    progress: say,
  });
  const report = [
    `# Solana facilitator benchmark`,
    ``,
    `${new Date().toISOString()} · ${cpus().length} cores (${cpus()[0]?.model ?? "?"}) · Node ${process.version}`,
    `One local Solana ledger (LiteSVM in its own process, 400 ms slots); both servers compiled, on it at once,`,
    `verify in three rounds per server in turns (after a warm-up each), each run's payments signed just before it,`,
    `each with its own fee payers (this service: 3; reference: 1, as the official example has), concurrency 100.`,
    `This service: ${databaseUrl ? "PostgreSQL" : "embedded PGlite"}, metering on. Payments are distinct and signed with the official @x402/svm client.`,
    ``,
    svmTable(ours, reference),
  ].join("\n");
  writeFileSync(
    `bench/results/svm${quick ? "-quick" : ""}${databaseUrl ? "-postgres" : ""}.md`,
    report,
  );
  process.stdout.write(`\n${report}`);
  if (!quick) {
    const side = (r: typeof ours) => ({
      verifyPerSecond: validPerSecond(r.verify),
      settlePerSecond: settledPerSecond(r.settle),
      cpuMsPerVerify: r.verifyCpuMs,
      cpuMsPerSettle: r.settleCpuMs,
      peakRssMb: r.peakRssMb,
    });
    await recordSummary({
      label: `Solana, ${databaseUrl ? "PostgreSQL" : "embedded database"}`,
      settleShape: "closed loop, concurrency 100",
      date: today,
      ours: side(ours),
      reference: side(reference),
    });
  }
}

async function evmBench(): Promise<void> {
  // PostgreSQL is measured at a higher concurrency than the embedded
  // database: its target is twice the settle rate at the same p50, and
  // 400/s at about 0.9 s each is some 360 settles in flight, more than 200.
  const settleConcurrency = databaseUrl ? 500 : 200;
  // A quick run still fills every slot once.
  const settleCount = quick ? Math.max(300, settleConcurrency) : 2000;
  const steadyRatePerSecond = databaseUrl ? 400 : 200;
  const { ours, reference, profileIntervalUs } = await runEvmBench({
    databaseUrl,
    verifySeconds: quick ? 6 : 30,
    verifyRounds: 3,
    verifyWarmupSeconds: quick ? 1 : 3,
    verifyConcurrency: 64,
    // Enough distinct payments for about 2,500 verifications a second.
    verifyPayloads: quick ? 12_500 : 75_000,
    settleCount,
    settleConcurrency,
    settleCapSeconds: quick ? 60 : 240,
    // (d): the rate each database's target names, for 10 s (3 s quick).
    steadyRatePerSecond,
    steadyCount: steadyRatePerSecond * (quick ? 3 : 10),
    progress: say,
  });

  const count = settleCount.toLocaleString("en-US");
  const header = [
    `# EVM facilitator benchmark`,
    ``,
    `${new Date().toISOString()} · ${cpus().length} cores (${cpus()[0]?.model ?? "?"}) · Node ${process.version}`,
    `One devnet (anvil, chain id 8453, 1 s blocks); both servers run on it at once, each with its own facilitator keys`,
    `(this service: 7 accounts; reference: 1, as the official example has). The load generator shares the machine.`,
    `Both run compiled JavaScript, CPU-profiled (one sample every ${profileIntervalUs / 1000} ms). This service runs what \`npm start\` runs`,
    `(dist/src/main.js, production mode): ${databaseUrl ? "PostgreSQL (a separate server process, not in its RSS)" : "embedded PGlite (inside its RSS)"}; metering on; per-key rate limits on`,
    `(max plan, above the load); webhooks on (an endpoint on a loopback receiver that answers 200).`,
    quick
      ? `Quick run: 6 s of verify at concurrency 64 (after a 1 s warm-up; three rounds, the two servers in turns); ${count} settles at concurrency ${settleConcurrency}; 3 s of settles arriving at ${steadyRatePerSecond} a second.`
      : `Full run: 30 s of verify at concurrency 64 (after a 3 s warm-up; three rounds of 10 s, the two servers in turns); ${count} distinct settles at concurrency ${settleConcurrency}; 10 s of settles arriving at ${steadyRatePerSecond} a second.`,
    ``,
  ].join("\n");
  const report = [
    header,
    evmTable(ours, reference),
    ``,
    targetsTable(
      evmTargets(ours, reference, {
        database: databaseUrl ? "postgres" : "pglite",
        settleConcurrency,
        steadyRatePerSecond,
      }),
    ),
    ``,
    `(b) is a closed loop on 1 s blocks: a worker's next payment leaves when its last one is answered, and every`,
    `payment of a block is answered at once, so each worker settles at most once a block and (b)'s p50 cannot fall`,
    `below about one block, whatever the server does. (d) sends at the target rate whatever is in flight, as`,
    `independent customers do, and its p50 is the half block a payment waits on average plus what the server adds.`,
    ``,
    cpuSection(
      [
        { name: "This service", profile: ours.profile },
        { name: "Reference", profile: reference.profile },
      ],
      profileIntervalUs,
    ),
  ].join("\n");
  const name = `evm${quick ? "-quick" : ""}${databaseUrl ? "-postgres" : ""}.md`;
  writeFileSync(`bench/results/${name}`, report);
  process.stdout.write(`\n${report}`);
  if (!quick) {
    const side = (r: typeof ours) => ({
      verifyPerSecond: validPerSecond(r.verify),
      settlePerSecond: settledPerSecond(r.settle),
      cpuMsPerVerify: r.cpuMsPer?.verify,
      cpuMsPerSettle: r.cpuMsPer?.settle,
      peakRssMb: r.peakRssMb,
    });
    await recordSummary({
      label: `EVM, ${databaseUrl ? "PostgreSQL" : "embedded database"}`,
      settleShape: `closed loop, concurrency ${settleConcurrency}`,
      date: today,
      ours: side(ours),
      reference: side(reference),
    });
  }
}
