/**
 * The tables that open `docs/benchmarks.md` and put every family side by
 * side: this service, the reference where one exists, and their ratio; the
 * chain's own ceiling where the run measured one; then the costs per
 * operation (CPU, the database's statements and CPU, peak RSS). Each full
 * run of a family replaces its row in `bench/results/summary.json` (kept
 * beside the reports, so a run of one family keeps the others' rows), and
 * the tables between the markers in the doc are written again from all
 * rows. Quick runs leave both alone. Rows recorded before a figure existed
 * show it as "–".
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { format, resolveConfig } from "prettier";

const ROWS_FILE = "bench/results/summary.json";
const DOC = "docs/benchmarks.md";
const START = "<!-- summary:start -->";
const END = "<!-- summary:end -->";

/** Figures of one server in one run. */
interface SideFigures {
  verifyPerSecond?: number | undefined;
  settlePerSecond: number;
  cpuMsPerVerify?: number | undefined;
  cpuMsPerSettle?: number | undefined;
  peakRssMb: number;
  /** Settle latency under open arrivals at half the closed loop's rate, as a customer meets it. */
  openSettleP50Ms?: number | undefined;
  openSettleP99Ms?: number | undefined;
  /** The rate those payments arrived at, a second. */
  openRatePerSecond?: number | undefined;
  /** The database's statements and round trips per settle of the closed loop (this service only). */
  dbStatementsPerSettle?: number | undefined;
  dbRoundTripsPerSettle?: number | undefined;
  /**
   * The database's own CPU ms per settle of the closed loop: the embedded
   * database's thread inside the process, or the PostgreSQL server's
   * processes beside it (which `cpuMsPerSettle` leaves out).
   */
  dbCpuMsPerSettle?: number | undefined;
}

export interface SummaryRow {
  /** Which run: "EVM, embedded database", "Solana, PostgreSQL", "NEAR"… */
  label: string;
  /** What the settle figure is, e.g. "closed loop, concurrency 200". */
  settleShape: string;
  date: string;
  ours: SideFigures;
  reference?: SideFigures | undefined;
  /** The machine's speed when it ran: ms per signature of bench/yardstick.ts (absent in older rows). */
  yardstickMs?: number | undefined;
  /**
   * What the chain alone takes a second, measured in the same run (EVM:
   * plain transfers from the service's own signers at the closed loop's
   * concurrency, the service idle), or "unbounded" where the ledger takes
   * every transaction waiting; absent where the run measured none.
   */
  chainCeilingPerSecond?: number | "unbounded" | undefined;
}

/** The order rows appear in, whatever order the runs came in. */
const ORDER = [
  "EVM, embedded database",
  "EVM, PostgreSQL",
  "Solana, embedded database",
  "Solana, PostgreSQL",
  "NEAR",
  "XRP Ledger",
  "Starknet",
];

/** A run's figure may fall this far below the recorded one before the run says so. */
const TOLERATED_DROP = 0.1;

/** This service's figures where more is better, as a warning names them. */
const RATES = [
  ["settlePerSecond", "settled per second"],
  ["verifyPerSecond", "valid verifications per second"],
] as const;

/**
 * Warning lines for each of this service's rates in `run` that fell more
 * than 10% below the row recorded for the same run (label) and scenario
 * (settle shape), each naming the figure, the recorded one and the drop,
 * and the machine's speed then and now where both are known (a slower
 * machine explains a drop the code did not cause). None when nothing is
 * recorded for that run and scenario.
 */
export function belowRecorded(run: SummaryRow, recorded: readonly SummaryRow[]): string[] {
  const before = recorded.find((r) => r.label === run.label && r.settleShape === run.settleShape);
  if (!before) return [];
  const machine =
    finite(run.yardstickMs) && finite(before.yardstickMs)
      ? ` (machine: ${run.yardstickMs.toFixed(3)} ms per yardstick signature now, ${before.yardstickMs.toFixed(3)} when recorded)`
      : finite(run.yardstickMs)
        ? ` (machine: ${run.yardstickMs.toFixed(3)} ms per yardstick signature now; none recorded then)`
        : "";
  const lines: string[] = [];
  for (const [key, name] of RATES) {
    const now = run.ours[key];
    const then = before.ours[key];
    if (!finite(now) || !finite(then) || then <= 0) continue;
    const drop = (then - now) / then;
    if (drop <= TOLERATED_DROP) continue;
    lines.push(
      `WARNING: ${run.label} (${run.settleShape}): ${name} ${num(now, 1)} is ${(drop * 100).toFixed(1)}% below the recorded ${num(then, 1)} (${before.date.slice(0, 10)}, bench/results/summary.json)${machine}`,
    );
  }
  return lines;
}

/** The rows recorded so far (bench/results/summary.json). */
function recordedRows(): SummaryRow[] {
  if (!existsSync(ROWS_FILE)) return [];
  return JSON.parse(readFileSync(ROWS_FILE, "utf8")) as SummaryRow[];
}

// A run that answered nothing has no per-operation figure (JSON keeps NaN as null).
const finite = (v: number | null | undefined): v is number =>
  typeof v === "number" && Number.isFinite(v);

const num = (v: number | null | undefined, digits: number) =>
  finite(v)
    ? v.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : "–";

/** "ours vs reference (ratio×)", the ratio ours over the reference's. */
function pair(ours: number | null | undefined, ref: number | null | undefined, digits: number) {
  if (!finite(ours) || !finite(ref) || ref <= 0) return num(ours, digits);
  return `${num(ours, digits)} vs ${num(ref, digits)} (${(ours / ref).toFixed(2)}×)`;
}

/** "p50 / p99", and the reference's beside it where it was measured. */
function latency(ours: SideFigures, ref: SideFigures | undefined): string {
  const one = (f: SideFigures) =>
    finite(f.openSettleP50Ms) && finite(f.openSettleP99Ms)
      ? `${num(f.openSettleP50Ms, 0)} / ${num(f.openSettleP99Ms, 0)}`
      : undefined;
  const o = one(ours);
  const r = ref ? one(ref) : undefined;
  const rate = finite(ours.openRatePerSecond) ? ` at ${num(ours.openRatePerSecond, 0)}/s` : "";
  return o === undefined ? "–" : r === undefined ? `${o}${rate}` : `${o} vs ${r}${rate}`;
}

/** The chain's ceiling, and this service's closed loop as a share of it. */
function ceiling(r: SummaryRow): [string, string] {
  const c = r.chainCeilingPerSecond;
  if (c === "unbounded") return ["unbounded", "–"];
  if (!finite(c) || c <= 0) return ["–", "–"];
  return [num(c, 1), finite(r.ours.settlePerSecond) ? num(r.ours.settlePerSecond / c, 2) : "–"];
}

/** "statements / round trips" per settle. */
function dbTraffic(f: SideFigures): string {
  return finite(f.dbStatementsPerSettle) || finite(f.dbRoundTripsPerSettle)
    ? `${num(f.dbStatementsPerSettle, 2)} / ${num(f.dbRoundTripsPerSettle, 2)}`
    : "–";
}

/**
 * Two tables, one row per run in family order: the rates (with the chain's
 * ceiling) and latency first, then what each operation costs.
 */
export function summaryTable(rows: readonly SummaryRow[]): string {
  const sorted = [...rows].sort((a, b) => ORDER.indexOf(a.label) - ORDER.indexOf(b.label));
  const run = (r: SummaryRow) => `${r.label} (${r.settleShape})`;
  return [
    "| run | valid verifications/s | settled/s | chain's ceiling (/s) | settled over ceiling | settle p50 / p99 (ms), open arrivals at the rate given | date |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    ...sorted.map((r) => {
      const ref = r.reference;
      const [limit, share] = ceiling(r);
      return `| ${run(r)} | ${pair(r.ours.verifyPerSecond, ref?.verifyPerSecond, 0)} | ${pair(r.ours.settlePerSecond, ref?.settlePerSecond, 1)} | ${limit} | ${share} | ${latency(r.ours, ref)} | ${r.date.slice(0, 10)} |`;
    }),
    "",
    "| run | CPU ms per verification | CPU ms per settlement | database CPU ms per settlement | database statements / round trips per settlement | peak RSS (MB) |",
    "| --- | --- | --- | --- | --- | --- |",
    ...sorted.map((r) => {
      const ref = r.reference;
      return `| ${run(r)} | ${pair(r.ours.cpuMsPerVerify, ref?.cpuMsPerVerify, 2)} | ${pair(r.ours.cpuMsPerSettle, ref?.cpuMsPerSettle, 2)} | ${num(r.ours.dbCpuMsPerSettle, 2)} | ${dbTraffic(r.ours)} | ${pair(r.ours.peakRssMb, ref?.peakRssMb, 0)} |`;
    }),
  ].join("\n");
}

/** Written as the project's formatter writes it, so the format check stays green. */
async function writeFormatted(path: string, text: string): Promise<void> {
  const options = (await resolveConfig(path)) ?? {};
  writeFileSync(path, await format(text, { ...options, filepath: path }));
}

/** Replaces `row`'s line in the rows file and writes the doc's table again. */
async function recordSummary(row: SummaryRow): Promise<void> {
  const rows = recordedRows().filter((r) => r.label !== row.label);
  rows.push(row);
  await writeFormatted(ROWS_FILE, JSON.stringify(rows));
  const doc = readFileSync(DOC, "utf8");
  const from = doc.indexOf(START);
  const to = doc.indexOf(END);
  if (from < 0 || to < from) throw new Error(`${DOC} has no ${START} … ${END} markers`);
  await writeFormatted(
    DOC,
    `${doc.slice(0, from + START.length)}\n\n${summaryTable(rows)}\n\n${doc.slice(to)}`,
  );
}

/**
 * What every run does with its row: warns of a drop below the recorded
 * figure (quick runs too, whose figures are recorded nowhere), and records
 * a full run's row when `stands` (its payments and records added up).
 */
export async function compareAndRecord(
  row: SummaryRow,
  opts: { quick: boolean; say: (line: string) => void; stands?: boolean },
): Promise<void> {
  for (const line of belowRecorded(row, recordedRows())) opts.say(line);
  if (!opts.quick && (opts.stands ?? true)) await recordSummary(row);
}
