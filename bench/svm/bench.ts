/**
 * The Solana benchmark: this service against the reference Solana
 * facilitator (bench/reference/svmServer.ts), on one local Solana ledger
 * (LiteSVM, a slot every 400 ms), in one run, both compiled.
 *
 *   (a) /verify throughput and p50/p99 at concurrency 100, distinct payments,
 *       the two servers in turns (bench/verifyInTurns.ts)
 *   (b) /settle of distinct payments at concurrency 100, in rounds, the two
 *       servers in turns (A B B A)
 *   (c) peak RSS of each server
 *
 * Payments are signed with the official `@x402/svm` client just before each
 * run: a Solana payment carries a blockhash valid for about a minute, and
 * names the fee payer that will sign it, so each side gets its own.
 *
 * Both servers run CPU-profiled (one sample every 5 ms, as the other benches
 * profile), so that the embedded database's thread's share of a settle can
 * be read from this service's profile.
 */
import type { ChildProcess } from "node:child_process";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { PaymentRequirements } from "@x402/core/types";
import { ExactSvmScheme } from "@x402/svm/exact/client";
import { createKeyPairSignerFromBytes, getBase58Encoder, type KeyPairSigner } from "@solana/kit";
import { SOLANA_MAINNET, startSolanaDevnet } from "../../devnet/svm/index.js";
import { openMigratedDb } from "../../src/storage/db.js";
import { seedBenchAccount } from "../benchAccount.js";
import { mergeLoadResults, percentile, runLoad, type LoadResult } from "../load.js";
import { verifyInTurns } from "../verifyInTurns.js";
import { cpuSecondsOf } from "../cpuShare.js";
import { monotonicUs, type TimeWindow } from "../cpuProfile.js";
import { databaseThreadMs, measurePostgresCpu } from "../databaseCpu.js";
import { serverProfile } from "../serverProfile.js";
import {
  STAGE_HISTOGRAMS,
  type HistogramSnapshot,
  classifySettle,
  freePort,
  peakRssMb,
  readDbTraffic,
  readHistograms,
  timeByStage,
  spawnServer,
  stopServers,
  validPerSecond,
  waitFor,
  type ServerExit,
} from "../harness.js";

export interface SvmBenchOptions {
  /** Measured verify seconds per server, in rounds that alternate between them. */
  verifySeconds: number;
  verifyRounds: number;
  verifyWarmupSeconds: number;
  /** Payments signed for each run of a server (more than it can verify in one). */
  verifyPayloadsPerRun: number;
  settleCount: number;
  /** The closed loop's payments are split into this many rounds per server, run in turns. */
  settleRounds: number;
  concurrency: number;
  /** This service on PostgreSQL instead of the embedded database. */
  databaseUrl?: string | undefined;
  progress: (line: string) => void;
}

export interface SvmSide {
  verify: LoadResult;
  settle: LoadResult;
  peakRssMb: number;
  /** Peak RSS once the verify rounds were over (the settle run may raise it). */
  peakRssAfterVerifyMb: number;
  /** This service only: where a settle's time went, by stage (mean ms), from its own timers. */
  stageTimes?: string | undefined;
  /** The same for the open arrivals (e). */
  openStageTimes?: string | undefined;
  /** This service only: database statements and round trips per settle. */
  dbPerSettle?: { statements: number; roundTrips: number } | undefined;
  /**
   * This service only: the database's own CPU ms per settlement of the
   * closed loop (the embedded database's thread from the CPU profile, or
   * PostgreSQL's processes on this machine).
   */
  dbCpuMsPerSettle?: number | undefined;
  /** The server's CPU milliseconds per valid verification, over the measured rounds. */
  verifyCpuMs: number | undefined;
  /** The server's CPU milliseconds per settled payment, over the settle run. */
  settleCpuMs: number | undefined;
  /** Open arrivals at `openRate` a second (half the slower closed loop's rate), as customers arrive. */
  open?: LoadResult | undefined;
  openRate?: number | undefined;
}

const settledCount = (r: LoadResult) => r.outcomes.get("settled") ?? 0;

/** One sample every 5 ms, as the EVM and family benches profile. */
const PROFILE_INTERVAL_US = 5_000;

/**
 * The official client asks the ledger for a blockhash for every payment it
 * signs. Under load the ledger may drop a connection; the payment is signed
 * again rather than the run lost (the signing is the bench's, not a server's).
 */
async function signedWithRetry<T>(sign: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await sign();
    } catch (e) {
      if (attempt >= 5) throw e;
      await new Promise((r) => setTimeout(r, 200 * attempt));
    }
  }
}

async function signAll(
  payers: KeyPairSigner[],
  rpcUrl: string,
  requirements: PaymentRequirements,
  n: number,
): Promise<string[]> {
  const schemes = payers.map((p) => new ExactSvmScheme(p, { rpcUrl }));
  const out: string[] = [];
  // A few at a time: each asks the ledger for a blockhash.
  for (let i = 0; i < n; i += 50) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(50, n - i) }, (_, j) =>
        signedWithRetry(() =>
          schemes[(i + j) % schemes.length]!.createPaymentPayload(2, requirements),
        ),
      ),
    );
    for (const partial of batch) {
      out.push(
        JSON.stringify({
          x402Version: 2,
          paymentPayload: { x402Version: 2, accepted: requirements, payload: partial.payload },
          paymentRequirements: requirements,
        }),
      );
    }
  }
  return out;
}

export async function runSvmBench(
  opts: SvmBenchOptions,
): Promise<{ ours: SvmSide; reference: SvmSide }> {
  const say = opts.progress;
  say("starting the local Solana ledger (LiteSVM, 400 ms slots)…");
  // A payer for every settle in flight (see the EVM bench): one payer's
  // settles wait for each other, and a few payers would measure that queue.
  const devnet = await startSolanaDevnet({
    payers: Math.max(opts.concurrency, 20),
    feePayers: 4,
  });
  const info = devnet.info;
  const children: ChildProcess[] = [];
  const profileDir = mkdtempSync(join(tmpdir(), "bench-svm-profile-"));
  const profiles = ["this-service", "reference"].map((name) => ({
    dir: join(profileDir, name),
    intervalUs: PROFILE_INTERVAL_US,
  }));
  let exits: ServerExit[] = [];
  let out: { ours: SvmSide; reference: SvmSide; settleWindows: TimeWindow[] } | undefined;
  try {
    const payers = await Promise.all(
      info.payerSecretKeys.map((k) => createKeyPairSignerFromBytes(getBase58Encoder().encode(k))),
    );
    const dataDir = mkdtempSync(join(tmpdir(), "bench-svm-"));
    const seeded = await openMigratedDb(
      opts.databaseUrl ? { databaseUrl: opts.databaseUrl } : { dataDir: join(dataDir, "pglite") },
    );
    const { key } = await seedBenchAccount(seeded.db);
    await seeded.close();

    const ourPort = await freePort();
    const ours = spawnServer(
      "src/main.ts",
      {
        SVM_RPC_URL: info.rpcUrl,
        // Fee payers 1–3; fee payer 0 is the reference's.
        SVM_PRIVATE_KEYS: info.facilitatorSecretKeys.slice(1).join(","),
        DATA_DIR: dataDir,
        ...(opts.databaseUrl ? { DATABASE_URL: opts.databaseUrl } : {}),
        HOST: "127.0.0.1",
        PORT: String(ourPort),
        // Production mode, scraped on loopback without a token.
        METRICS_PUBLIC: "true",
        LOG_LEVEL: "error",
        // Limits on, as in production: the load counts against the bench key's
        // max plan, configured far above it (see evm.ts), never the address's.
        RATE_LIMIT_PLAN_MAX: "1000000",
      },
      profiles[0],
    );
    children.push(ours);
    const refPort = await freePort();
    const reference = spawnServer(
      "bench/reference/svmServer.ts",
      {
        RPC_URL: info.rpcUrl,
        SECRET_KEY: info.facilitatorSecretKeys[0]!,
        PORT: String(refPort),
      },
      profiles[1],
    );
    children.push(reference);
    await waitFor(`http://127.0.0.1:${ourPort}/supported`);
    await waitFor(`http://127.0.0.1:${refPort}/supported`);

    const sides = [
      { name: "this service", port: ourPort, pid: ours.pid!, headers: { "x-api-key": key } },
      {
        name: "reference",
        port: refPort,
        pid: reference.pid!,
        headers: {} as Record<string, string>,
      },
    ];
    const sideRequirements = await Promise.all(
      sides.map(async (side) => {
        const url = `http://127.0.0.1:${side.port}`;
        const supported = (await (await fetch(`${url}/supported`)).json()) as {
          kinds: { network: string; extra?: Record<string, unknown> }[];
        };
        const feePayer = supported.kinds.find((k) => k.network === SOLANA_MAINNET)!.extra![
          "feePayer"
        ];
        return (amount: string): PaymentRequirements =>
          ({
            scheme: "exact",
            network: SOLANA_MAINNET,
            asset: info.assets.USDC,
            amount,
            payTo: info.payTo,
            maxTimeoutSeconds: 60,
            extra: { feePayer },
          }) as PaymentRequirements;
      }),
    );
    // (a) in turns, as the EVM bench does. Each run signs its payments just
    // before it starts: a blockhash expires within a minute, less than the
    // whole phase takes.
    const verified = await verifyInTurns(
      sides.map((side, i) => ({
        name: side.name,
        url: `http://127.0.0.1:${side.port}`,
        pid: side.pid,
        countsDb: i === 0,
        headers: side.headers,
        bodies: () =>
          signAll(payers, info.rpcUrl, sideRequirements[i]!("1000"), opts.verifyPayloadsPerRun),
      })),
      {
        seconds: opts.verifySeconds,
        rounds: opts.verifyRounds,
        warmupSeconds: opts.verifyWarmupSeconds,
        concurrency: opts.concurrency,
        progress: say,
      },
    );
    // (b) in rounds, in turns (A B B A …), for the reason verify runs in
    // turns: the machine drifts over minutes, and one server settling
    // after the other would carry the drift into the ratio.
    const rounds = Math.max(1, opts.settleRounds);
    const perRound = Math.ceil(opts.settleCount / rounds);
    const closed = sides.map(() => ({
      runs: [] as LoadResult[],
      cpuSeconds: 0 as number | undefined,
      timed: [] as { before: HistogramSnapshot; after: HistogramSnapshot }[],
      db: { statements: 0, roundTrips: 0 },
      /** When its rounds ran, for its CPU profile. */
      windows: [] as TimeWindow[],
      /** PostgreSQL's processes' CPU seconds over its rounds (this service on PostgreSQL only). */
      postgresCpuSeconds: 0 as number | undefined,
    }));
    say(
      `(b) /settle at concurrency ${opts.concurrency}: ${rounds} rounds of ${perRound} payments per server, in turns…`,
    );
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? [...sides.keys()] : [...sides.keys()].reverse();
      for (const i of order) {
        const side = sides[i]!;
        const own = closed[i]!;
        const url = `http://127.0.0.1:${side.port}`;
        const bodies = await signAll(payers, info.rpcUrl, sideRequirements[i]!("1001"), perRound);
        const ownTimers = i === 0;
        const timedBefore = ownTimers ? await readHistograms(url, STAGE_HISTOGRAMS) : undefined;
        const dbBefore = ownTimers ? await readDbTraffic(url) : undefined;
        const postgresCpu = ownTimers && opts.databaseUrl ? measurePostgresCpu() : undefined;
        const cpuBefore = cpuSecondsOf(side.pid);
        const fromUs = monotonicUs();
        const settle = await runLoad({
          url: `${url}/settle`,
          headers: side.headers,
          concurrency: opts.concurrency,
          bodies,
          capMs: 120_000,
          classify: classifySettle,
        });
        const cpuAfter = cpuSecondsOf(side.pid);
        own.windows.push({ fromUs, toUs: monotonicUs() });
        if (postgresCpu) {
          const seconds = postgresCpu();
          own.postgresCpuSeconds =
            own.postgresCpuSeconds !== undefined && seconds !== undefined
              ? own.postgresCpuSeconds + seconds
              : undefined;
        }
        say(
          `    round ${round + 1}, ${side.name}: ${(settledCount(settle) / settle.seconds).toFixed(1)} settled/s (${[...settle.outcomes].map(([k, v]) => `${k}: ${v}`).join(", ")} in ${settle.seconds.toFixed(1)} s)`,
        );
        own.runs.push(settle);
        own.cpuSeconds =
          own.cpuSeconds !== undefined && cpuBefore !== undefined && cpuAfter !== undefined
            ? own.cpuSeconds + cpuAfter - cpuBefore
            : undefined;
        if (timedBefore) {
          own.timed.push({
            before: timedBefore,
            after: await readHistograms(url, STAGE_HISTOGRAMS),
          });
        }
        if (dbBefore) {
          const dbAfter = await readDbTraffic(url);
          own.db.statements += dbAfter.statements - dbBefore.statements;
          own.db.roundTrips += dbAfter.roundTrips - dbBefore.roundTrips;
        }
      }
    }
    const results: SvmSide[] = sides.map((side, i) => {
      const own = closed[i]!;
      const settle = mergeLoadResults(own.runs);
      const settled = settledCount(settle);
      const valid = verified[i]!.verify.outcomes.get("valid") ?? 0;
      const verifyCpu = verified[i]!.serverCpuSeconds;
      // Only this service's own traffic moves its histograms, so the first
      // round's "before" and the last one's "after" span every round of it.
      const first = own.timed[0];
      const last = own.timed.at(-1);
      return {
        verify: verified[i]!.verify,
        settle,
        peakRssMb: peakRssMb(side.pid),
        peakRssAfterVerifyMb: verified[i]!.rssAfterVerify,
        stageTimes: first && last ? timeByStage(first.before, last.after) : undefined,
        dbPerSettle:
          i === 0
            ? {
                statements: own.db.statements / settle.count,
                roundTrips: own.db.roundTrips / settle.count,
              }
            : undefined,
        verifyCpuMs: verifyCpu !== undefined && valid > 0 ? (verifyCpu * 1000) / valid : undefined,
        settleCpuMs:
          own.cpuSeconds !== undefined && settled > 0
            ? (own.cpuSeconds * 1000) / settled
            : undefined,
      };
    });
    // Open arrivals: payments due at half the slower closed loop's rate,
    // whether or not earlier ones were answered, the same rate for both
    // servers. Latency counts from each payment's due time, so it is the
    // wait a customer meets: the slot, and what each server adds to it.
    const closedRates = results.map((r) => settledCount(r.settle) / r.settle.seconds);
    const openRate = Math.max(1, Math.min(...closedRates) / 2);
    for (const [i, side] of sides.entries()) {
      const url = `http://127.0.0.1:${side.port}`;
      say(
        `(e) ${side.name}: ${opts.settleCount} payments arriving at ${openRate.toFixed(1)} a second…`,
      );
      const openBodies = await signAll(
        payers,
        info.rpcUrl,
        sideRequirements[i]!("1002"),
        opts.settleCount,
      );
      const openTimedBefore = i === 0 ? await readHistograms(url, STAGE_HISTOGRAMS) : undefined;
      const open = await runLoad({
        url: `${url}/settle`,
        headers: side.headers,
        concurrency: 1_000,
        bodies: openBodies,
        ratePerSecond: openRate,
        capMs: 120_000,
        classify: classifySettle,
      });
      say(
        `    ${[...open.outcomes].map(([k, v]) => `${k}: ${v}`).join(", ")} in ${open.seconds.toFixed(1)} s`,
      );
      const openTimedAfter = i === 0 ? await readHistograms(url, STAGE_HISTOGRAMS) : undefined;
      results[i] = {
        ...results[i]!,
        open,
        openRate,
        openStageTimes:
          openTimedBefore && openTimedAfter
            ? timeByStage(openTimedBefore, openTimedAfter)
            : undefined,
        peakRssMb: peakRssMb(side.pid),
      };
    }
    out = { ours: results[0]!, reference: results[1]!, settleWindows: closed[0]!.windows };
    const pgSeconds = opts.databaseUrl ? closed[0]!.postgresCpuSeconds : undefined;
    const settled = settledCount(out.ours.settle);
    if (pgSeconds !== undefined && settled > 0) {
      out.ours.dbCpuMsPerSettle = (pgSeconds * 1000) / settled;
    }
  } finally {
    // SIGTERM: each server exits by itself and Node writes its profile.
    exits = await stopServers(children);
    await devnet.stop();
  }
  // The embedded database's thread, over this service's closed-loop rounds.
  const profile = serverProfile(profiles[0]!.dir, exits[0], [
    { label: "settle", windows: out.settleWindows },
  ]);
  const threadMs = databaseThreadMs(profile, "settle", !opts.databaseUrl);
  const settled = settledCount(out.ours.settle);
  if (threadMs !== undefined && settled > 0) out.ours.dbCpuMsPerSettle = threadMs / settled;
  // Kept where BENCH_CPU_PROFILE_DIR asks, for `bench/profile-summary.ts`.
  const keep = process.env["BENCH_CPU_PROFILE_DIR"];
  if (keep) cpSync(profileDir, keep, { recursive: true });
  rmSync(profileDir, { recursive: true, force: true });
  return { ours: out.ours, reference: out.reference };
}

export function svmTable(ours: SvmSide, ref: SvmSide): string {
  const p = (r: LoadResult, q: number) => percentile(r.latenciesMs, q).toFixed(0);
  const settled = (r: LoadResult) => r.outcomes.get("settled") ?? 0;
  const ratio = (a: number, b: number) => (b > 0 ? `${(a / b).toFixed(1)}×` : "n/a");
  const ms = (v: number | undefined) => (v === undefined ? "–" : v.toFixed(2));
  // CPU is a cost: the ratio says what share of the reference's this service spends.
  const cpuRatio = (a: number | undefined, b: number | undefined) =>
    a !== undefined && b !== undefined && b > 0 ? `${(a / b).toFixed(2)}× the reference's` : "";
  const rows = [
    [
      "valid verifications per second",
      validPerSecond(ours.verify).toFixed(0),
      validPerSecond(ref.verify).toFixed(0),
      ratio(validPerSecond(ours.verify), validPerSecond(ref.verify)),
    ],
    [
      "verify p50 / p99 (ms)",
      `${p(ours.verify, 50)} / ${p(ours.verify, 99)}`,
      `${p(ref.verify, 50)} / ${p(ref.verify, 99)}`,
      "",
    ],
    [
      "settled / sent",
      `${settled(ours.settle)} / ${ours.settle.count}`,
      `${settled(ref.settle)} / ${ref.settle.count}`,
      "",
    ],
    [
      "settled per second",
      (settled(ours.settle) / ours.settle.seconds).toFixed(1),
      (settled(ref.settle) / ref.settle.seconds).toFixed(1),
      ratio(settled(ours.settle) / ours.settle.seconds, settled(ref.settle) / ref.settle.seconds),
    ],
    [
      "settle p50 / p99 (ms)",
      `${p(ours.settle, 50)} / ${p(ours.settle, 99)}`,
      `${p(ref.settle, 50)} / ${p(ref.settle, 99)}`,
      "",
    ],
    [
      "server CPU per valid verification (ms)",
      ms(ours.verifyCpuMs),
      ms(ref.verifyCpuMs),
      cpuRatio(ours.verifyCpuMs, ref.verifyCpuMs),
    ],
    [
      "server CPU per settlement (ms)",
      ms(ours.settleCpuMs),
      ms(ref.settleCpuMs),
      cpuRatio(ours.settleCpuMs, ref.settleCpuMs),
    ],
    [
      `(e) open arrivals at ${ours.openRate?.toFixed(1) ?? "–"} a second: settled / sent`,
      ours.open ? `${settled(ours.open)} / ${ours.open.count}` : "–",
      ref.open ? `${settled(ref.open)} / ${ref.open.count}` : "–",
      "",
    ],
    [
      "(e) open arrivals: settle p50 / p99 (ms)",
      ours.open ? `${p(ours.open, 50)} / ${p(ours.open, 99)}` : "–",
      ref.open ? `${p(ref.open, 50)} / ${p(ref.open, 99)}` : "–",
      "",
    ],
    ["peak RSS (MB)", ours.peakRssMb.toFixed(0), ref.peakRssMb.toFixed(0), ""],
    [
      "peak RSS after verify (MB)",
      ours.peakRssAfterVerifyMb.toFixed(0),
      ref.peakRssAfterVerifyMb.toFixed(0),
      "",
    ],
  ];
  const outcomes = (r: LoadResult) => [...r.outcomes].map(([k, v]) => `${k} ${v}`).join(", ");
  return [
    "| scenario | this service | reference | ratio |",
    "| --- | --- | --- | --- |",
    ...rows.map((r) => `| ${r.join(" | ")} |`),
    "",
    `Outcomes, this service: verify ${outcomes(ours.verify)}; settle ${outcomes(ours.settle)}.`,
    `Outcomes, reference: verify ${outcomes(ref.verify)}; settle ${outcomes(ref.settle)}.`,
    "",
    `Where this service's settle time went (mean ms per settle, by stage, from its own timers): ${ours.stageTimes ?? "–"}.`,
    `The same for the open arrivals (e): ${ours.openStageTimes ?? "–"}.`,
    ours.dbPerSettle
      ? `Database per settle: ${ours.dbPerSettle.statements.toFixed(2)} statements in ${ours.dbPerSettle.roundTrips.toFixed(2)} round trips${ours.dbCpuMsPerSettle === undefined ? "" : `, ${ours.dbCpuMsPerSettle.toFixed(2)} ms of the database's own CPU`}.`
      : "",
    "",
  ].join("\n");
}
