/**
 * (a) of every benchmark: verify on each server in turns (A B A B …), after
 * an unmeasured warm-up round each.
 *
 * The machine's own speed drifts by tens of per cent over minutes (other
 * work on the host, CPU frequency), and a server run once after the other
 * would carry that drift into the ratio; in turns, both see the same
 * machine. Each server gets every payload of its list at most once (each
 * keeps its own place), so no cache can answer for it. The servers may
 * share one list (where any facilitator accepts the same payment) or have
 * their own (where a payment names its fee payer).
 */
import { combineCpuShares, cpuSecondsOf, measureCpu, type CpuShare } from "./cpuShare.js";
import { monotonicUs, type TimeWindow } from "./cpuProfile.js";
import { classifyVerify, peakRssMb, readCounters, validPerSecond } from "./harness.js";
import { mergeLoadResults, runLoad, type LoadResult } from "./load.js";

export interface VerifySide {
  name: string;
  url: string;
  pid: number;
  /** This service (it exports the verify-thread counter), not the reference. */
  countsDb: boolean;
  headers: Record<string, string>;
  /**
   * Distinct /verify request bodies for this server: one list, used in order
   * across its runs, or a function that signs a fresh list just before each
   * run (where a payment expires within a minute, as a recent blockhash does).
   */
  bodies: readonly string[] | (() => Promise<readonly string[]>);
}

export interface VerifiedSide {
  verify: LoadResult;
  verifyWindows: TimeWindow[];
  verifyShare: CpuShare | undefined;
  /** CPU seconds the server used over the measured rounds (undefined without /proc). */
  serverCpuSeconds: number | undefined;
  payloadsUsed: number;
  rssAfterVerify: number;
  /** Verifications the service's verify threads answered in the measured rounds. */
  onThreads: number | undefined;
  /** Requests sent in the measured rounds (answered in time or not). */
  sentInRounds: number;
}

export interface InTurnsOptions {
  /** Measured seconds per server, split evenly over the rounds. */
  seconds: number;
  rounds: number;
  warmupSeconds: number;
  concurrency: number;
  /** The chain node's process name, for where the CPU went (cpuShare.ts); none for a ledger without one. */
  nodeCommand?: string;
  progress: (line: string) => void;
}

export async function verifyInTurns(
  sides: readonly VerifySide[],
  opts: InTurnsOptions,
): Promise<VerifiedSide[]> {
  const say = opts.progress;
  const next = sides.map(() => 0);
  const rounds = sides.map(
    () =>
      [] as {
        result: LoadResult;
        window: TimeWindow;
        share: CpuShare | undefined;
        serverCpu: number | undefined;
      }[],
  );
  const roundSeconds = opts.seconds / opts.rounds;
  const run = async (i: number, seconds: number) => {
    const side = sides[i]!;
    const signed = typeof side.bodies === "function";
    const bodies = typeof side.bodies === "function" ? await side.bodies() : side.bodies;
    const from = signed ? 0 : next[i]!;
    const cpu = measureCpu(side.pid, opts.nodeCommand);
    const serverCpuBefore = cpuSecondsOf(side.pid);
    const fromUs = monotonicUs();
    const result = await runLoad({
      url: `${side.url}/verify`,
      headers: side.headers,
      concurrency: opts.concurrency,
      body: (k) => bodies[(from + k) % bodies.length]!,
      durationMs: seconds * 1000,
      classify: classifyVerify,
    });
    if (signed && result.sent > bodies.length)
      say(`    ${side.name}: ${result.sent} sent from ${bodies.length} signed; some repeated`);
    // An answer that came too late to count still used its payload up.
    next[i] = (signed ? next[i]! : from) + result.sent;
    const serverCpuAfter = cpuSecondsOf(side.pid);
    return {
      result,
      window: { fromUs, toUs: monotonicUs() },
      share: cpu(),
      serverCpu:
        serverCpuBefore === undefined || serverCpuAfter === undefined
          ? undefined
          : serverCpuAfter - serverCpuBefore,
    };
  };
  say(
    `(a) /verify at concurrency ${opts.concurrency}: a ${opts.warmupSeconds} s warm-up each, then ${opts.rounds} rounds of ${roundSeconds} s each, in turns…`,
  );
  for (const i of sides.keys()) await run(i, opts.warmupSeconds);
  // The thread counter also counted the warm-up: read it now, to subtract.
  const onThreadsBefore = await Promise.all(sides.map((side) => verifiedOnThreads(side)));
  for (let round = 0; round < opts.rounds; round++) {
    for (const [i, side] of sides.entries()) {
      const r = await run(i, roundSeconds);
      rounds[i]!.push(r);
      say(
        `    round ${round + 1}, ${side.name}: ${validPerSecond(r.result).toFixed(0)} valid verifications/s`,
      );
    }
  }
  return Promise.all(
    sides.map(async (side, i) => {
      const own = rounds[i]!;
      const verify = mergeLoadResults(own.map((r) => r.result));
      say(
        `    ${side.name}: ${validPerSecond(verify).toFixed(0)} valid verifications/s over ${verify.seconds.toFixed(1)} s (${[...verify.outcomes].map(([k, v]) => `${k}: ${v}`).join(", ")})`,
      );
      return {
        verify,
        verifyWindows: own.map((r) => r.window),
        verifyShare: combineCpuShares(
          own.map((r) => ({ share: r.share, seconds: r.result.seconds })),
        ),
        serverCpuSeconds: own.every((r) => r.serverCpu !== undefined)
          ? own.reduce((a, r) => a + r.serverCpu!, 0)
          : undefined,
        // The warm-up's payloads count too: a repeat is a repeat.
        payloadsUsed: next[i]!,
        rssAfterVerify: peakRssMb(side.pid),
        onThreads: side.countsDb
          ? (await verifiedOnThreads(side))! - onThreadsBefore[i]!
          : undefined,
        sentInRounds: own.reduce((n, r) => n + r.result.sent, 0),
      };
    }),
  );
}

/** Verifications a side's verify threads answered so far (undefined: it has no such counter). */
async function verifiedOnThreads(side: { url: string; countsDb: boolean }) {
  if (!side.countsDb) return undefined;
  return (await readCounters(side.url, { n: "x402_verifications_on_thread_total" })).n;
}
