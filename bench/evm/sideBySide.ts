/**
 * The EVM side-by-side benchmark's run as `npm run bench` makes it
 * (`BENCH_ONLY=evm`): this service and the reference facilitator on one
 * devnet (bench.ts), its report with the targets (targets.ts) and the CPU
 * profiles, and its row of docs/benchmarks.md, with the chain's own ceiling
 * measured last in the same run.
 */
import { writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { evmTable, runEvmBench } from "./bench.js";
import { evmTargets, targetsTable } from "./targets.js";
import { cpuSection } from "../profileReport.js";
import { compareAndRecord } from "../summary.js";
import { yardstickLine } from "../yardstick.js";
import { validPerSecond } from "../harness.js";
import { settledPerSecond, type SideBySideRun } from "../sideBySide.js";
import { percentile } from "../load.js";

export async function run({
  quick,
  databaseUrl,
  say,
  today,
  yardstick,
}: SideBySideRun): Promise<void> {
  // PostgreSQL is measured at a higher concurrency than the embedded
  // database: its target is twice the settle rate at the same p50, and
  // 400/s at about 0.9 s each is some 360 settles in flight, more than 200.
  const settleConcurrency = databaseUrl ? 500 : 200;
  // A quick run still fills every slot once.
  const settleCount = quick ? Math.max(300, settleConcurrency) : 2000;
  const steadyRatePerSecond = databaseUrl ? 400 : 200;
  const { ours, reference, profileIntervalUs, chainCeilingPerSecond } = await runEvmBench({
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
    yardstickLine(yardstick),
    `One devnet (anvil, chain id 8453, 1 s blocks); both servers run on it at once, each with its own facilitator keys`,
    `(this service: 7 accounts; reference: 1, as the official example has). The load generator shares the machine.`,
    `Both run compiled JavaScript, CPU-profiled (one sample every ${profileIntervalUs / 1000} ms). This service runs what \`npm start\` runs`,
    `(dist/src/main.js, production mode): ${databaseUrl ? "PostgreSQL (a separate server process, not in its RSS)" : "embedded PGlite (inside its RSS)"}; metering on; per-key rate limits on`,
    `(max plan, above the load); webhooks on (an endpoint on a loopback receiver that answers 200).`,
    quick
      ? `Quick run: 6 s of verify at concurrency 64 (after a 1 s warm-up; three rounds, the two servers in turns); ${count} settles at concurrency ${settleConcurrency}; 3 s of settles arriving at ${steadyRatePerSecond} a second.`
      : `Full run: 30 s of verify at concurrency 64 (after a 3 s warm-up; three rounds of 10 s, the two servers in turns); ${count} distinct settles at concurrency ${settleConcurrency}; 10 s of settles arriving at ${steadyRatePerSecond} a second.`,
    `Last, both servers idle, the chain's ceiling: ${count} plain USDC transfers from this service's signers at concurrency ${settleConcurrency}.`,
    ``,
  ].join("\n");
  const report = [
    header,
    evmTable(ours, reference, chainCeilingPerSecond),
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
  const side = (r: typeof ours) => ({
    verifyPerSecond: validPerSecond(r.verify),
    settlePerSecond: settledPerSecond(r.settle),
    cpuMsPerVerify: r.cpuMsPer?.verify,
    cpuMsPerSettle: r.cpuMsPer?.settle,
    peakRssMb: r.peakRssMb,
    // (d): the rate this database's target names, not half of (b)'s (see docs/benchmarks.md).
    openSettleP50Ms: percentile(r.steady.latenciesMs, 50),
    openSettleP99Ms: percentile(r.steady.latenciesMs, 99),
    openRatePerSecond: steadyRatePerSecond,
    dbStatementsPerSettle: r.dbPerSettle?.statements,
    dbRoundTripsPerSettle: r.dbPerSettle?.roundTrips,
    dbCpuMsPerSettle: r.dbCpuMsPerSettle,
  });
  const row = {
    label: `EVM, ${databaseUrl ? "PostgreSQL" : "embedded database"}`,
    settleShape: `closed loop, concurrency ${settleConcurrency}`,
    date: today,
    ours: side(ours),
    reference: side(reference),
    yardstickMs: yardstick.msPerSignature,
    chainCeilingPerSecond,
  };
  await compareAndRecord(row, { quick, say });
}
