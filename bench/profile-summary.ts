/**
 * Summarises a V8 .cpuprofile (from BENCH_CPU_PROFILE_DIR) as self time per
 * package and per function, so a benchmark's "limited by" line can quote
 * where the CPU went without opening DevTools.
 *
 *   npx tsx bench/profile-summary.ts <file.cpuprofile> [top=25]
 */
import { readFileSync } from "node:fs";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const [file, topArg] = process.argv.slice(2);
if (!file) {
  process.stderr.write("usage: npx tsx bench/profile-summary.ts <file.cpuprofile> [top]\n");
  process.exit(2);
}
const top = Number(topArg ?? 25);
const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));

/** Which package (or "this service", "node", "(gc)") a frame belongs to. */
function packageOf(url: string, fn: string): string {
  if (!url) return fn.startsWith("(") ? fn : "(native)";
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1]!;
  if (url.startsWith("node:")) return "node";
  return "this service";
}

const selfMs = new Map<string, number>();
const packageMs = new Map<string, number>();
let total = 0;
profile.samples.forEach((id, i) => {
  const node = byId.get(id);
  if (!node) return;
  const ms = (profile.timeDeltas[i] ?? 0) / 1000;
  total += ms;
  const { functionName, url, lineNumber } = node.callFrame;
  const pkg = packageOf(url, functionName);
  const where = url ? `${url.replace(/^.*node_modules\//, "")}:${lineNumber + 1}` : "";
  const key = `${functionName || "(anonymous)"} ${where}`.trim();
  selfMs.set(key, (selfMs.get(key) ?? 0) + ms);
  packageMs.set(pkg, (packageMs.get(pkg) ?? 0) + ms);
});

const pct = (ms: number) => `${((100 * ms) / total).toFixed(1)}%`.padStart(6);
const busy = total - (packageMs.get("(idle)") ?? 0);
process.stdout.write(
  `${file}: ${(total / 1000).toFixed(1)} s sampled, ${(busy / 1000).toFixed(1)} s busy\n\nby package:\n`,
);
for (const [pkg, ms] of [...packageMs].sort((a, b) => b[1] - a[1]).slice(0, top)) {
  process.stdout.write(`${pct(ms)}  ${pkg}\n`);
}
process.stdout.write("\nby function (self time):\n");
for (const [fn, ms] of [...selfMs].sort((a, b) => b[1] - a[1]).slice(0, top)) {
  process.stdout.write(`${pct(ms)}  ${fn}\n`);
}
