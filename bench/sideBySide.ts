/**
 * The side-by-side benchmarks: this service and a reference facilitator
 * (bench/reference/) on one local ledger. Each lives in a folder of its
 * family's own, `bench/<name>/sideBySide.ts` (its run, its report, its row
 * of docs/benchmarks.md), and is found here by that folder, so `npm run
 * bench` lists them without naming one; `BENCH_ONLY=<name>` runs one.
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { LoadResult } from "./load.js";
import type { Yardstick } from "./yardstick.js";

/** What a run of `npm run bench` gives each benchmark. */
export interface SideBySideRun {
  /** BENCH_QUICK=1: a short smoke run, whose figures go to no table. */
  quick: boolean;
  /** BENCH_DATABASE_URL: this service on PostgreSQL instead of its embedded database. */
  databaseUrl: string | undefined;
  /** A progress line, to stderr. */
  say(line: string): void;
  /** The run's date (ISO 8601), for docs/benchmarks.md. */
  today: string;
  /** The machine's speed, measured before the run (bench/yardstick.ts): in every report. */
  yardstick: Yardstick;
}

export const settledPerSecond = (r: LoadResult) => (r.outcomes.get("settled") ?? 0) / r.seconds;

const BENCH_DIR = fileURLToPath(new URL(".", import.meta.url));
const moduleOf = (name: string) => join(BENCH_DIR, name, "sideBySide.ts");

/** The side-by-side benchmarks' names (their folders), in order. */
export function sideBySideBenches(): string[] {
  return readdirSync(BENCH_DIR, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(moduleOf(entry.name)))
    .map((entry) => entry.name)
    .sort();
}

/** Runs the side-by-side benchmark `name`. */
export async function runSideBySide(name: string, run: SideBySideRun): Promise<void> {
  const bench = (await import(pathToFileURL(moduleOf(name)).href)) as {
    run(run: SideBySideRun): Promise<void>;
  };
  await bench.run(run);
}
