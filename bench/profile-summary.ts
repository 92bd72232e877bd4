/**
 * Summarises a V8 .cpuprofile (from BENCH_CPU_PROFILE_DIR) as self time per
 * category, per package and per function, so a benchmark's "limited by" line
 * can quote where the CPU went without opening DevTools. The whole profile
 * is summed, start-up included; the benchmark report sums only its phases.
 *
 *   npx tsx bench/profile-summary.ts <file.cpuprofile> [top=25]
 */
import { breakdown, type Share } from "./cpuBreakdown.js";
import { readCpuProfile, selfTimes } from "./cpuProfile.js";

const [file, topArg] = process.argv.slice(2);
if (!file) {
  process.stderr.write("usage: npx tsx bench/profile-summary.ts <file.cpuprofile> [top]\n");
  process.exit(2);
}
const top = Number(topArg ?? 25);
const b = breakdown(selfTimes(readCpuProfile(file)));

const out = (line: string) => process.stdout.write(`${line}\n`);
const list = <K>(title: string, shares: readonly Share<K>[], name: (k: K) => string) => {
  out(`\n${title} (share of busy time):`);
  for (const s of shares.slice(0, top)) {
    out(`${`${(100 * s.share).toFixed(1)}%`.padStart(6)}  ${name(s.key)}`);
  }
};

out(`${file}: ${(b.totalMs / 1000).toFixed(1)} s sampled, ${(b.busyMs / 1000).toFixed(1)} s busy`);
list("by category", b.byCategory, (k) => k);
list("by package", b.byPackage, (k) => k);
list("by function (self time)", b.byFunction, (k) => `${k.label}  [${k.category}]`);
