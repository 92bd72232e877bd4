/**
 * The one table of `docs/benchmarks.md` that puts every family side by side:
 * this service, the reference where one exists, their ratio, CPU per
 * operation and peak RSS. Each full run of a family replaces its row in
 * `bench/results/summary.json` (kept beside the reports, so a run of one
 * family keeps the others' rows), and the table between the markers in the
 * doc is written again from all rows. Quick runs leave both alone.
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

export function summaryTable(rows: readonly SummaryRow[]): string {
  const sorted = [...rows].sort((a, b) => ORDER.indexOf(a.label) - ORDER.indexOf(b.label));
  return [
    "| run | valid verifications/s | settled/s | settle p50 / p99 (ms), open arrivals at the rate given | CPU ms per verification | CPU ms per settlement | peak RSS (MB) | date |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ...sorted.map((r) => {
      const ref = r.reference;
      return `| ${r.label} (${r.settleShape}) | ${pair(r.ours.verifyPerSecond, ref?.verifyPerSecond, 0)} | ${pair(r.ours.settlePerSecond, ref?.settlePerSecond, 1)} | ${latency(r.ours, ref)} | ${pair(r.ours.cpuMsPerVerify, ref?.cpuMsPerVerify, 2)} | ${pair(r.ours.cpuMsPerSettle, ref?.cpuMsPerSettle, 2)} | ${pair(r.ours.peakRssMb, ref?.peakRssMb, 0)} | ${r.date.slice(0, 10)} |`;
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
