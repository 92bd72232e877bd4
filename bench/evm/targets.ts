/**
 * The EVM benchmark's targets for this service, shown under the table as met
 * or not met. They are what the service aims at on this 2-core machine, not
 * assertions: a run that misses one still writes its report.
 */
import { percentile, type LoadResult } from "../load.js";
import { validPerSecond } from "../harness.js";
import type { Side } from "./bench.js";

type DatabaseKind = "pglite" | "postgres";

export interface TargetRun {
  database: DatabaseKind;
  settleConcurrency: number;
  steadyRatePerSecond: number;
}

interface Target {
  target: string;
  measured: string;
  /** undefined: this run cannot tell (it ran under other conditions). */
  met: boolean | undefined;
}

/** The settle target of each database, and the concurrency it is measured at. */
const SETTLE = {
  pglite: { perSecond: 200, p50Ms: 900, concurrency: 200, name: "embedded PGlite" },
  postgres: { perSecond: 400, p50Ms: 900, concurrency: 500, name: "PostgreSQL" },
} as const;
/** Peak RSS of this service; on PGlite the database is inside the process. */
const RSS_MB = { pglite: 400, postgres: 300 } as const;
const VERIFY_RATIO = 10;

/** (d) kept up if its last answer came within this long after its last arrival. */
const KEPT_UP_SLACK_S = 3;

const settled = (r: LoadResult) => r.outcomes.get("settled") ?? 0;
const sent = (r: LoadResult) => [...r.outcomes.values()].reduce((a, n) => a + n, 0);

export function evmTargets(ours: Side, ref: Side, run: TargetRun): Target[] {
  const oursVerify = validPerSecond(ours.verify);
  const refVerify = validPerSecond(ref.verify);
  const ratio = refVerify > 0 ? oursVerify / refVerify : NaN;

  const s = SETTLE[run.database];
  const rate = settled(ours.settle) / ours.settle.seconds;
  const p50 = percentile(ours.settle.latenciesMs, 50);
  const settleMeasured = `${rate.toFixed(1)}/s, p50 ${p50.toFixed(0)} ms at concurrency ${run.settleConcurrency}`;

  const steadyP50 = percentile(ours.steady.latenciesMs, 50);
  const arrivalsSeconds = sent(ours.steady) / run.steadyRatePerSecond;
  const keptUp = ours.steady.seconds <= arrivalsSeconds + KEPT_UP_SLACK_S;
  const steadyAllSettled = settled(ours.steady) === sent(ours.steady);

  const rssLimit = RSS_MB[run.database];
  const failed = sent(ours.settle) - settled(ours.settle);
  return [
    {
      target: `valid verifications per second ≥ ${VERIFY_RATIO}× the reference`,
      measured: Number.isFinite(ratio)
        ? `${ratio.toFixed(1)}× (${oursVerify.toFixed(0)} vs ${refVerify.toFixed(0)})`
        : "–",
      met: Number.isFinite(ratio) ? ratio >= VERIFY_RATIO : false,
    },
    {
      target: `settle ≥ ${s.perSecond}/s with p50 ≤ ${s.p50Ms} ms on ${s.name} at concurrency ${s.concurrency}`,
      measured: settleMeasured,
      met:
        run.settleConcurrency === s.concurrency ? rate >= s.perSecond && p50 <= s.p50Ms : undefined,
    },
    {
      target: `settles arriving at a steady ${s.perSecond}/s on ${s.name}: every one settled, kept up (done within ${KEPT_UP_SLACK_S} s of the last arrival), p50 ≤ ${s.p50Ms} ms`,
      measured: `${settled(ours.steady)} of ${sent(ours.steady)} settled in ${ours.steady.seconds.toFixed(1)} s (arrivals over ${arrivalsSeconds.toFixed(1)} s), p50 ${steadyP50.toFixed(0)} ms`,
      met:
        run.steadyRatePerSecond === s.perSecond
          ? steadyAllSettled && keptUp && steadyP50 <= s.p50Ms
          : undefined,
    },
    {
      target: `peak RSS ≤ ${rssLimit} MB on ${s.name}${run.database === "pglite" ? " (database included)" : ""}`,
      measured: `${ours.peakRssMb.toFixed(0)} MB (by the end of (a) ${ours.peakRssAfterMb.verify.toFixed(0)}, of (b) ${ours.peakRssAfterMb.settle.toFixed(0)})`,
      met: ours.peakRssMb <= rssLimit,
    },
    {
      target: "zero failed settles",
      measured: `${failed} of ${sent(ours.settle)} failed in (b), ${sent(ours.steady) - settled(ours.steady)} of ${sent(ours.steady)} in (d)`,
      met: failed === 0 && steadyAllSettled,
    },
  ];
}

export function targetsTable(targets: readonly Target[]): string {
  const verdict = (met: boolean | undefined) =>
    met === undefined ? "not measured here" : met ? "met" : "**not met**";
  return [
    "| target (this service) | measured | |",
    "|---|---|---|",
    ...targets.map((t) => `| ${t.target} | ${t.measured} | ${verdict(t.met)} |`),
  ].join("\n");
}
