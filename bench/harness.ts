/**
 * What every benchmark shares: free ports, waiting for a server, peak RSS,
 * starting a compiled server (optionally CPU-profiled), stopping servers (the
 * profile is written on exit), and how answers are counted.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import type { LoadResult } from "./load.js";

export async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export async function waitFor(url: string, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not come up`);
}

/** Peak resident set size (VmHWM) of a running process, in MB. */
export function peakRssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? NaN);
  return kb / 1024;
}

/** Where and how finely `node --cpu-prof` profiles a server (written when it exits). */
export interface CpuProfileOptions {
  /** A directory of its own: one file per thread, named by Node. */
  dir: string;
  /** Sampling interval; Node's default (1,000 µs) when absent. */
  intervalUs?: number | undefined;
}

/**
 * Both servers run as compiled JavaScript from dist/ (`npm run build`, done
 * by bench/run.ts), as production runs: no TypeScript loader in either
 * process's memory or start-up.
 */
export function spawnServer(
  script: string,
  env: Record<string, string>,
  profile?: CpuProfileOptions,
): ChildProcess {
  // Without options, BENCH_CPU_PROFILE_DIR=dir writes a .cpuprofile of each
  // server on exit (open it in Chrome DevTools, or bench/profile-summary.ts).
  const profileDir = process.env["BENCH_CPU_PROFILE_DIR"];
  const flags = profile
    ? [
        "--cpu-prof",
        `--cpu-prof-dir=${profile.dir}`,
        ...(profile.intervalUs ? [`--cpu-prof-interval=${profile.intervalUs}`] : []),
      ]
    : profileDir
      ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`]
      : [];
  return spawn(process.execPath, [...flags, join("dist", script.replace(/\.ts$/, ".js"))], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "ignore", "inherit"],
  });
}

/** How a server ended. A CPU profile exists only if it exited by itself. */
export interface ServerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** It had ended before it was asked to stop (a crash). */
  early: boolean;
  /** It did not exit within the grace time after SIGTERM and was killed. */
  forced: boolean;
  /** From SIGTERM to exit. */
  stopMs: number;
}

/** How long a server gets to exit after SIGTERM before SIGKILL. */
export const STOP_GRACE_MS = 15_000;

/**
 * Stops the servers with SIGTERM, as a supervisor does, and waits for them
 * (SIGKILL after STOP_GRACE_MS). A server that handles SIGTERM and exits
 * writes its CPU profile; one that is killed writes none.
 */
export async function stopServers(children: readonly ChildProcess[]): Promise<ServerExit[]> {
  return Promise.all(
    children.map(
      (c) =>
        new Promise<ServerExit>((resolve) => {
          const started = Date.now();
          if (c.exitCode !== null || c.signalCode !== null) {
            return resolve({
              code: c.exitCode,
              signal: c.signalCode,
              early: true,
              forced: false,
              stopMs: 0,
            });
          }
          let forced = false;
          const force = setTimeout(() => {
            forced = true;
            c.kill("SIGKILL");
          }, STOP_GRACE_MS);
          c.once("exit", (code, signal) => {
            clearTimeout(force);
            resolve({ code, signal, early: false, forced, stopMs: Date.now() - started });
          });
          c.kill("SIGTERM");
        }),
    ),
  );
}

/** Only answers that verified count: an error or a refusal is not throughput. */
export const validPerSecond = (r: LoadResult) => (r.outcomes.get("valid") ?? 0) / r.seconds;

export const classifyVerify = (status: number, json: unknown) => {
  if (status !== 200) return `http_${status}`;
  const j = json as { isValid?: boolean; invalidReason?: string };
  return j.isValid ? "valid" : (j.invalidReason ?? "invalid");
};
export const classifySettle = (status: number, json: unknown) => {
  if (status !== 200) return `http_${status}`;
  const j = json as { success?: boolean; errorReason?: string; errorMessage?: string };
  if (j.success) return "settled";
  const nonce = /nonce/i.test(j.errorMessage ?? "") ? " (nonce)" : "";
  return `${j.errorReason ?? "failed"}${nonce}`;
};

/** The service's database counters (`x402_db_*_total` on /metrics). */
export interface DbTraffic {
  statements: number;
  roundTrips: number;
}

/** Unlabelled counters from the service's /metrics (NaN for one it does not export). */
export async function readCounters<K extends string>(
  baseUrl: string,
  names: Record<K, string>,
): Promise<Record<K, number>> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const out = {} as Record<K, number>;
  for (const [key, name] of Object.entries(names) as [K, string][]) {
    out[key] = Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? NaN);
  }
  return out;
}

/** Count and sum of every series of some histograms on /metrics, keyed `name{labels}`. */
export type HistogramSnapshot = Map<string, { count: number; sum: number }>;

export async function readHistograms(
  baseUrl: string,
  names: readonly string[],
): Promise<HistogramSnapshot> {
  return parseHistograms(await (await fetch(`${baseUrl}/metrics`)).text(), names);
}

/** The Prometheus text format's `_count` and `_sum` lines of the named histograms. */
export function parseHistograms(text: string, names: readonly string[]): HistogramSnapshot {
  const out: HistogramSnapshot = new Map();
  for (const line of text.split("\n")) {
    const m = /^(\w+)_(count|sum)(\{[^}]*\})? (\S+)$/.exec(line);
    if (!m || !names.includes(m[1]!)) continue;
    const key = `${m[1]}${m[3] ?? ""}`;
    const entry = out.get(key) ?? { count: 0, sum: 0 };
    entry[m[2] as "count" | "sum"] = Number(m[4]);
    out.set(key, entry);
  }
  return out;
}

/**
 * Where a phase's settles spent their time, from the service's own timers:
 * the mean own time of each settle stage, and of the transaction's broadcast
 * and inclusion inside the mechanism, in ms ("–" when nothing was timed).
 */
export function timeByStage(before: HistogramSnapshot, after: HistogramSnapshot): string {
  const stages: [string, number][] = [];
  const inner: [string, number][] = [];
  for (const [key, a] of after) {
    const b = before.get(key) ?? { count: 0, sum: 0 };
    const count = a.count - b.count;
    if (count <= 0) continue;
    const label = /(?:stage|phase)="([^"]+)"/.exec(key)?.[1] ?? key;
    const into = key.startsWith("x402_transaction_phase_seconds") ? inner : stages;
    into.push([label, ((a.sum - b.sum) / count) * 1000]);
  }
  // Largest first: the figures are read to find what held a settle.
  const list = (xs: [string, number][]) =>
    xs
      .sort((x, y) => y[1] - x[1])
      .map(([label, ms]) => `${label} ${ms < 10 ? ms.toFixed(1) : ms.toFixed(0)}`)
      .join(" · ");
  if (stages.length === 0) return "–";
  return list(stages) + (inner.length ? ` (in the mechanism: ${list(inner)})` : "");
}

export const STAGE_HISTOGRAMS = ["x402_settle_stage_seconds", "x402_transaction_phase_seconds"];

export function readDbTraffic(baseUrl: string): Promise<DbTraffic> {
  return readCounters(baseUrl, {
    statements: "x402_db_statements_total",
    roundTrips: "x402_db_round_trips_total",
  });
}
