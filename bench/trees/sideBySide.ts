/**
 * This tree against an earlier commit of itself (`BENCH_ONLY=trees`): EVM
 * settle as `npm start` runs it, the two trees in turns on one machine,
 * each beside its chain's own ceiling. It answers "did this change cost
 * the default anything?" with both figures from the same run, where a
 * figure recorded on another day would compare two machines' moods.
 *
 *   BENCH_BASE=<commit>   the tree to compare with (default: d972a7a, the
 *                         tree before the blame-on-proof defences)
 *
 * A full run takes two rounds (this, base, this, base) of 1,200 distinct
 * payments each at concurrency 200, and judges each tree by its median; a
 * quick run, one round of 300.
 */
import { writeFileSync } from "node:fs";
import { cpus } from "node:os";
import type { SideBySideRun } from "../sideBySide.js";
import { prepareBaseTree } from "./baseTree.js";
import { measureTree, type TreeFigures } from "./treeRun.js";

const DEFAULT_BASE = "d972a7a";

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

export async function run({ quick, databaseUrl, say }: SideBySideRun): Promise<void> {
  if (databaseUrl) {
    say("trees: `npm start` runs the embedded database; BENCH_DATABASE_URL is not used here");
  }
  const base = prepareBaseTree(process.env["BENCH_BASE"] || DEFAULT_BASE, say);
  const settles = quick ? 300 : 1_200;
  const concurrency = 200;
  const rounds = quick ? 1 : 2;
  const rows: { tree: "this" | "base"; figures: TreeFigures }[] = [];
  for (let round = 0; round < rounds; round++) {
    for (const tree of ["this", "base"] as const) {
      say(
        `trees: round ${round + 1} of ${rounds}, ${tree === "this" ? "this tree" : `base ${base.commit.slice(0, 12)}`}…`,
      );
      const figures = await measureTree(tree === "this" ? process.cwd() : base.dir, {
        settles,
        concurrency,
        ceilingTransfers: settles,
        say,
      });
      say(
        `  ${figures.settledPerSecond.toFixed(1)} settled/s (p50 ${figures.p50Ms.toFixed(0)} ms), chain ceiling ${figures.ceilingPerSecond.toFixed(1)}/s; ${figures.outcomes}`,
      );
      rows.push({ tree, figures });
    }
  }
  const of = (tree: "this" | "base") => rows.filter((r) => r.tree === tree).map((r) => r.figures);
  const rate = (tree: "this" | "base") => median(of(tree).map((f) => f.settledPerSecond));
  const ratio = rate("this") / rate("base");
  const fmt = (n: number, d = 1) =>
    n.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d });
  const report = [
    `# This tree against ${base.commit.slice(0, 12)}: EVM settle as \`npm start\` runs it`,
    ``,
    `${new Date().toISOString()} · ${cpus().length} cores (${cpus()[0]?.model ?? "?"}) · Node ${process.version}`,
    `Each tree runs \`npm start\` (devnet mode, embedded database, ${"eip155:8453"} only, 1 s blocks) on its own devnet, one after the other;`,
    `${settles.toLocaleString("en-US")} distinct payments signed with the official client, POSTed to /settle at concurrency ${concurrency}`,
    `(a closed loop). Then, with the service idle, the chain's ceiling: as many plain USDC transfers from the service's own`,
    `signers at the same concurrency, each waiting for its receipt. Base: ${base.commit.slice(0, 12)} (${base.subject}).`,
    ``,
    `| round | tree | settled/s | p50 / p99 (ms) | paid / promised | chain ceiling (transfers/s) | settled over ceiling |`,
    `| --- | --- | --- | --- | --- | --- | --- |`,
    ...rows.map(
      (r, i) =>
        `| ${Math.floor(i / 2) + 1} | ${r.tree === "this" ? "this tree" : "base"} | ${fmt(r.figures.settledPerSecond)} | ${fmt(r.figures.p50Ms, 0)} / ${fmt(r.figures.p99Ms, 0)} | ${fmt(r.figures.paidOverPromised, 2)} | ${fmt(r.figures.ceilingPerSecond)} | ${fmt(r.figures.settledPerSecond / r.figures.ceilingPerSecond, 2)} |`,
    ),
    ``,
    `Median settled/s: this tree ${fmt(rate("this"))}, base ${fmt(rate("base"))}: **${fmt(ratio, 2)}×**.`,
    ``,
  ].join("\n");
  writeFileSync(`bench/results/trees${quick ? "-quick" : ""}.md`, report);
  process.stdout.write(report);
  if (ratio < 0.9) {
    say(
      `WARNING: this tree settles ${fmt((1 - ratio) * 100, 0)}% slower than ${base.commit.slice(0, 12)} on the default (${fmt(rate("this"))} vs ${fmt(rate("base"))} a second)`,
    );
  }
  const unpaid = rows.filter(
    (r) => Math.abs(r.figures.paidOverPromised - 1) > 1e-9 && r.figures.settled > 0,
  );
  if (unpaid.length > 0)
    say(
      `WARNING: in ${unpaid.length} run(s) payTo did not receive exactly what the successes promised`,
    );
}
