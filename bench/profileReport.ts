/**
 * The report's "where each server's CPU went" section: for each side, the
 * main categories of self time per phase and the functions that took most.
 */
import { shareOf } from "./cpuBreakdown.js";
import type { Category } from "./profileCategories.js";
import type { ServerProfile } from "./serverProfile.js";

/**
 * A category gets a row when it took at least this share in some phase; the
 * rest is one "everything else" row. Enough rows to cover most of the time,
 * few enough to read.
 */
const MIN_CATEGORY_SHARE = 0.03;
const MAX_CATEGORIES = 10;
const TOP_FUNCTIONS = 8;

const pct = (share: number) => `${(100 * share).toFixed(1)}%`;

function sideSection(name: string, p: ServerProfile): string[] {
  if (!p.ok) return [`**${name}**: ${p.why}.`, ""];
  const busy = p.phases
    .map((ph) => {
      const [main = "0.0 s", ...workers] = ph.threadBusyMs.map(
        (ms) => `${(ms / 1000).toFixed(1)} s`,
      );
      const others = workers.length
        ? `, ${workers.length === 1 ? "worker thread" : "worker threads"} ${workers.join(" + ")}`
        : "";
      return `${ph.label} (${ph.seconds.toFixed(1)} s): main thread busy ${main}${others}`;
    })
    .join("; ");
  const lines = [
    `**${name}** (${p.stopped}, profile written): ${busy || `busy ${(p.overall.busyMs / 1000).toFixed(1)} s`}.${
      p.note ? ` (${p.note}.)` : ""
    }`,
    "",
  ];

  // The categories that matter in any phase, in order of the whole.
  const columns = p.phases.length > 0 ? p.phases : [{ label: "whole run", cpu: p.overall }];
  const shown: Category[] = p.overall.byCategory
    .map((c) => c.key)
    .filter((k) => columns.some((c) => shareOf(c.cpu.byCategory, k) >= MIN_CATEGORY_SHARE))
    .slice(0, MAX_CATEGORIES);
  const rest = (c: (typeof columns)[number]) =>
    c.cpu.byCategory.filter((x) => !shown.includes(x.key)).reduce((a, x) => a + x.share, 0);
  lines.push(
    `| category (share of busy time) | ${columns.map((c) => c.label).join(" | ")} |`,
    `|---|${columns.map(() => "---").join("|")}|`,
    ...shown.map(
      (k) => `| ${k} | ${columns.map((c) => pct(shareOf(c.cpu.byCategory, k))).join(" | ")} |`,
    ),
    `| everything else | ${columns.map((c) => pct(rest(c))).join(" | ")} |`,
    "",
    `Top functions by self time${p.phases.length > 0 ? ` (${p.phases.map((ph) => ph.label).join(" and ")} together)` : ""}:`,
    "",
    ...p.overall.byFunction
      .slice(0, TOP_FUNCTIONS)
      .map((f) => `- ${pct(f.share)} \`${f.key.label}\`: ${f.key.category}`),
    "",
  );
  return lines;
}

export function cpuSection(
  sides: readonly { name: string; profile: ServerProfile }[],
  intervalUs: number,
): string {
  return [
    `### Where each server's CPU went`,
    ``,
    `Self time of each server's JavaScript threads (the main thread and any worker), from CPU profiles taken during`,
    `the whole run (V8's sampling profiler, one sample every ${intervalUs / 1000} ms) and summed over the phases only, start-up and`,
    `shutdown left out. Shares are of busy (non-idle) time. Categories go by each frame's script (its package); Node's`,
    `own functions (sockets, streams, fs) and native or WebAssembly frames count for the package that called them.`,
    ``,
    ...sides.flatMap((s) => sideSection(s.name, s.profile)),
  ].join("\n");
}
