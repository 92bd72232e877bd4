/**
 * The Solana side-by-side benchmark's run as `npm run bench` makes it
 * (`BENCH_ONLY=svm`): this service and the reference facilitator on one
 * local ledger (bench.ts), its report and its row of docs/benchmarks.md.
 */
import { writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { runSvmBench, svmTable } from "./bench.js";
import { compareAndRecord } from "../summary.js";
import { yardstickLine } from "../yardstick.js";
import { validPerSecond } from "../harness.js";
import { percentile } from "../load.js";
import { settledPerSecond, type SideBySideRun } from "../sideBySide.js";

export async function run({
  quick,
  databaseUrl,
  say,
  today,
  yardstick,
}: SideBySideRun): Promise<void> {
  const { ours, reference } = await runSvmBench({
    verifySeconds: quick ? 6 : 21,
    verifyRounds: 3,
    verifyWarmupSeconds: quick ? 1 : 3,
    // Above what either server verifies in a 7 s round (up to about 750 a second).
    verifyPayloadsPerRun: quick ? 1_500 : 6_000,
    settleCount: quick ? 200 : 1_000,
    settleRounds: 2,
    concurrency: 100,
    databaseUrl,
    progress: say,
  });
  const report = [
    `# Solana facilitator benchmark`,
    ``,
    `${new Date().toISOString()} · ${cpus().length} cores (${cpus()[0]?.model ?? "?"}) · Node ${process.version}`,
    yardstickLine(yardstick),
    `One local Solana ledger (LiteSVM in its own process, 400 ms slots); both servers compiled, on it at once,`,
    `verify in three rounds per server in turns (after a warm-up each), the settle closed loop in two rounds per server in turns (A B B A),`,
    `each run's payments signed just before it,`,
    `each with its own fee payers (this service: 3; reference: 1, as the official example has), concurrency 100.`,
    `This service: ${databaseUrl ? "PostgreSQL" : "embedded PGlite"}, metering on. Payments are distinct and signed with the official @x402/svm client.`,
    `Both servers CPU-profiled (one sample every 5 ms); the database's CPU is ${databaseUrl ? "PostgreSQL's processes on this machine" : "the embedded database's thread, from the profile"}, over this service's closed-loop rounds.`,
    ``,
    svmTable(ours, reference),
  ].join("\n");
  writeFileSync(
    `bench/results/svm${quick ? "-quick" : ""}${databaseUrl ? "-postgres" : ""}.md`,
    report,
  );
  process.stdout.write(`\n${report}`);
  const side = (r: typeof ours) => ({
    verifyPerSecond: validPerSecond(r.verify),
    settlePerSecond: settledPerSecond(r.settle),
    cpuMsPerVerify: r.verifyCpuMs,
    cpuMsPerSettle: r.settleCpuMs,
    peakRssMb: r.peakRssMb,
    openSettleP50Ms: r.open ? percentile(r.open.latenciesMs, 50) : undefined,
    openSettleP99Ms: r.open ? percentile(r.open.latenciesMs, 99) : undefined,
    openRatePerSecond: r.openRate,
    dbStatementsPerSettle: r.dbPerSettle?.statements,
    dbRoundTripsPerSettle: r.dbPerSettle?.roundTrips,
    dbCpuMsPerSettle: r.dbCpuMsPerSettle,
  });
  const row = {
    label: `Solana, ${databaseUrl ? "PostgreSQL" : "embedded database"}`,
    settleShape: "closed loop, concurrency 100",
    date: today,
    ours: side(ours),
    reference: side(reference),
    yardstickMs: yardstick.msPerSignature,
  };
  await compareAndRecord(row, { quick, say });
}
