/**
 * The EVM settlement benchmark: this service against the reference
 * facilitator, on one devnet (anvil, 1 s blocks), in one run.
 *
 *   (a) /verify throughput and p50/p99 at concurrency 64 for 30 s, in rounds
 *       that alternate between the two servers
 *   (b) /settle of 2,000 distinct payments at concurrency 200 (500 on PostgreSQL)
 *   (c) peak RSS of each server process
 *   (d) /settle of 2,000 more, arriving at a steady 200 a second (400 on
 *       PostgreSQL) whether or not earlier ones were answered
 *
 * (b) is a closed loop: each worker sends its next payment when the last is
 * answered. Every payment mined in a block is answered at once, so the
 * workers fall into step with the blocks and a settle takes one block time
 * however fast the server is; (b) can show at most one payment per worker
 * per block. (d) is how customers' payments actually arrive (independently),
 * and its p50 shows what the server adds to the wait for the next block.
 *
 * Both servers run CPU-profiled at a coarse interval; each profile is summed
 * over (a), (b) and (d) once the server has exited. This service runs as
 * `npm start` runs it, with a webhook endpoint for the bench account.
 */
import type { ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import type { PaymentRequirements } from "@x402/core/types";
import { privateKeyToAccount } from "viem/accounts";
import type { Hex } from "viem";
import { startDevnet } from "../../devnet/evm/index.js";
import { openMigratedDb } from "../../src/storage/db.js";
import { seedBenchAccount } from "../benchAccount.js";
import { setWebhookEndpoint } from "../../src/features/webhooks/webhookRepository.js";
import { percentile, runLoad, type LoadResult } from "../load.js";
import { verifyInTurns } from "../verifyInTurns.js";
import {
  classifySettle,
  freePort,
  peakRssMb,
  readDbTraffic,
  readHistograms,
  STAGE_HISTOGRAMS,
  timeByStage,
  spawnServer,
  stopServers,
  validPerSecond,
  waitFor,
  type CpuProfileOptions,
  type ServerExit,
} from "../harness.js";
import { cpuSecondsOf, measureCpu, type CpuShare } from "../cpuShare.js";
import { monotonicUs, type TimeWindow } from "../cpuProfile.js";
import { serverProfile, type ServerProfile } from "../serverProfile.js";
import { startWebhookReceiver } from "../webhookReceiver.js";
import { chainCeiling } from "../chainCeiling.js";
import { databaseThreadMs, measurePostgresCpu } from "../databaseCpu.js";

/**
 * One sample every 5 ms: two hundred samples a second still show where the
 * time goes, and the profiler's own cost (a stack walk per sample) stays
 * within the run-to-run noise; at Node's default 1 ms it is several per cent
 * of a CPU-bound server. BENCH_CPU_PROFILE_INTERVAL_US overrides it, for a
 * closer look; BENCH_CPU_PROFILE_DIR keeps the profiles (for DevTools or
 * bench/profile-summary.ts) instead of deleting them after the report.
 */
const PROFILE_INTERVAL_US = 5_000;

/** The chain node's process name, for where the CPU went (cpuShare.ts). */
const NODE_COMMAND = "anvil";

/** anvil mines a block every second, whatever is waiting. */
const BLOCK_TIME_SECONDS = 1;

export interface EvmBenchOptions {
  /** Measured verify time per server, split into rounds that alternate between the two. */
  verifySeconds: number;
  verifyRounds: number;
  /** An unmeasured first round per server, so neither is measured while its code is still cold. */
  verifyWarmupSeconds: number;
  settleCount: number;
  settleConcurrency: number;
  verifyConcurrency: number;
  /** (d): payments a second, sent on schedule whatever is still in flight. */
  steadyRatePerSecond: number;
  steadyCount: number;
  /** Give up on a settle run after this long (the reference can be very slow). */
  settleCapSeconds: number;
  progress: (line: string) => void;
  /** Run this service on this PostgreSQL database instead of embedded PGlite. */
  databaseUrl?: string | undefined;
  /**
   * Distinct payloads for the verify run. Each is verified once per side
   * until they run out (then they repeat, and the table says how often), so
   * the throughput is that of new payments, not of a cache.
   */
  verifyPayloads: number;
}

export interface Side {
  verify: LoadResult;
  /** Verify requests whose payload this side had already verified. */
  verifyRepeats: number;
  settle: LoadResult;
  /** (d): settles arriving at a steady rate. */
  steady: LoadResult;
  /** Over the whole run, i.e. as it stood at the end of (d). */
  peakRssMb: number;
  /** The peak so far (VmHWM) at the end of (a) and of (b): what each phase added. */
  peakRssAfterMb: { verify: number; settle: number };
  verifyCpu: CpuShare | undefined;
  settleCpu: CpuShare | undefined;
  /**
   * The server's own CPU milliseconds (every thread, from /proc) per valid
   * verification in (a)'s measured rounds and per settled payment in (b)
   * and (d): a cost that does not depend on what else shares the machine.
   */
  cpuMsPer: { verify: number; settle: number; steady: number } | undefined;
  /** Database statements and round trips per settle request (this service only). */
  dbPerSettle: { statements: number; roundTrips: number } | undefined;
  /**
   * The database's own CPU ms per settled payment in (b) (this service
   * only): the embedded database's thread (from the CPU profile), or the
   * PostgreSQL server's processes on this machine.
   */
  dbCpuMsPerSettle: number | undefined;
  /** Mean own time per settle stage in (b) and (d), as text (this service only). */
  stageTimes: { settle: string; steady: string } | undefined;
  /** Verifications answered by verify threads during (a) (this service only; 0 when none ran). */
  verifiedOnThreads: number | undefined;
  /** /verify requests sent in (a)'s measured rounds, answered in time or not. */
  verifySent: number;
  /** Webhook deliveries the receiver had by the end of (b) and of (d) (this service only). */
  webhookDeliveries: { settle: number; steady: number } | undefined;
  /** Its CPU profile summed over (a) and (b), or why there is none. */
  profile: ServerProfile;
}

export interface EvmBenchResult {
  ours: Side;
  reference: Side;
  profileIntervalUs: number;
  /**
   * The chain's own ceiling, measured last with both servers idle: plain
   * USDC transfers a second from this service's signers at (b)'s
   * concurrency, as many as (b) settled.
   */
  chainCeilingPerSecond: number | undefined;
}

/** What is measured of a side while it runs; its profile is read after it exits. */
type Measured = Omit<Side, "profile" | "dbCpuMsPerSettle"> & {
  postgresCpuMsPerSettle: number | undefined;
  verifyWindows: TimeWindow[];
  settleWindow: TimeWindow;
  steadyWindow: TimeWindow;
};

async function signAll(
  keys: Hex[],
  requirements: PaymentRequirements,
  n: number,
  progress?: (line: string) => void,
): Promise<string[]> {
  const schemes = keys.map((k) => new ExactEvmScheme(privateKeyToAccount(k)));
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    if (progress && i > 0 && i % 5_000 === 0) progress(`    signed ${i} of ${n}…`);
    const partial = await schemes[i % schemes.length]!.createPaymentPayload(2, requirements);
    out.push(
      JSON.stringify({
        x402Version: 2,
        paymentPayload: { x402Version: 2, accepted: requirements, payload: partial.payload },
        paymentRequirements: requirements,
      }),
    );
  }
  return out;
}

export async function runEvmBench(opts: EvmBenchOptions): Promise<EvmBenchResult> {
  const say = opts.progress;
  say("starting devnet (anvil, 1 s blocks)…");
  // A payer for every settle in flight, as a merchant's customers are: one
  // payer's settles wait for each other (one in flight per payer), so
  // payments from a few payers would measure that queue, not the service.
  // Round robin over them, a closed loop's settles in flight are distinct
  // payers' whenever its concurrency is at most their number.
  const payers = Math.max(opts.settleConcurrency, 40);
  const devnet = await startDevnet({
    blockTimeSeconds: BLOCK_TIME_SECONDS,
    payers,
    facilitators: 8,
    outFile: null,
  });
  const info = devnet.networks["eip155:8453"]!;
  const usdc = info.assets["USDC"]!;
  const receiver = await startWebhookReceiver();
  const keptProfileDir = process.env["BENCH_CPU_PROFILE_DIR"] || undefined;
  if (keptProfileDir) mkdirSync(keptProfileDir, { recursive: true });
  // A fresh directory each run, so no earlier run's files are summed in.
  const profileDir = mkdtempSync(join(keptProfileDir ?? tmpdir(), "bench-profile-"));
  const profileIntervalUs =
    Number(process.env["BENCH_CPU_PROFILE_INTERVAL_US"]) || PROFILE_INTERVAL_US;
  // A directory per server: Node writes one file per thread into it.
  const profiles: CpuProfileOptions[] = ["this-service", "reference"].map((name) => ({
    dir: join(profileDir, name),
    intervalUs: profileIntervalUs,
  }));
  const children: ChildProcess[] = [];
  const measured: Measured[] = [];
  let exits: ServerExit[] = [];
  let chainCeilingPerSecond: number | undefined;
  try {
    const base = (payTo: Hex): PaymentRequirements => ({
      scheme: "exact",
      network: "eip155:8453",
      asset: usdc,
      amount: "1000",
      payTo,
      maxTimeoutSeconds: 3600,
      extra: { name: "USD Coin", version: "2" },
    });
    say(
      `signing ${(opts.settleCount + opts.steadyCount) * 2 + opts.verifyPayloads} payments with the official client…`,
    );
    const payerKeys = info.payerPrivateKeys as Hex[];
    const verifyBodies = await signAll(
      payerKeys,
      base("0x000000000000000000000000000000000000aaaa"),
      opts.verifyPayloads,
      say,
    );
    const oursSettle = await signAll(
      payerKeys,
      base("0x000000000000000000000000000000000000bbbb"),
      opts.settleCount,
    );
    const refSettle = await signAll(
      payerKeys,
      base("0x000000000000000000000000000000000000cccc"),
      opts.settleCount,
    );
    const oursSteady = await signAll(
      payerKeys,
      base("0x000000000000000000000000000000000000bbbb"),
      opts.steadyCount,
    );
    const refSteady = await signAll(
      payerKeys,
      base("0x000000000000000000000000000000000000cccc"),
      opts.steadyCount,
    );

    // This service: production mode against the devnet chain, on embedded
    // PGlite unless a PostgreSQL database is given.
    const dataDir = mkdtempSync(join(tmpdir(), "bench-"));
    const seeded = await openMigratedDb(
      opts.databaseUrl ? { databaseUrl: opts.databaseUrl } : { dataDir: join(dataDir, "pglite") },
    );
    const { accountId, key } = await seedBenchAccount(seeded.db);
    // Webhooks on, as for a customer who set an endpoint: every settlement
    // outcome writes an outbox event in its transaction, and the delivery
    // worker sends it. Without an endpoint neither happens.
    await setWebhookEndpoint(seeded.db, accountId, receiver.url, { allowPrivateTargets: true });
    await seeded.close();
    const ourPort = await freePort();
    const ours = spawnServer(
      "src/main.ts",
      {
        EVM_RPC_URLS_8453: info.rpcUrl,
        // The devnet's Base mines every second, not every two as Base does:
        // told so, the service follows receipts and fees at that pace, as
        // `npm start` does on its own devnet.
        EVM_BLOCK_TIME_MS_8453: String(BLOCK_TIME_SECONDS * 1000),
        // Keys 1–7; key 0 is the reference's.
        EVM_PRIVATE_KEYS: (info.facilitatorPrivateKeys as Hex[]).slice(1).join(","),
        DATA_DIR: dataDir,
        ...(opts.databaseUrl ? { DATABASE_URL: opts.databaseUrl } : {}),
        HOST: "127.0.0.1",
        PORT: String(ourPort),
        // Production mode, scraped on loopback without a token.
        METRICS_PUBLIC: "true",
        LOG_LEVEL: "error",
        // Every limit on, as a customer meets them: the load carries the
        // bench key, so it counts against the key's plan, never the address's.
        // The max plan is configured at 1,000,000 requests a minute, far above
        // what this machine's load generator sends (about 2,500 a second), so
        // no request is refused and none is flattered by a fast 429.
        RATE_LIMIT_PLAN_MAX: "1000000",
        // The receiver is on loopback, which the SSRF guard refuses by
        // default; a customer's endpoint is public and passes it anyway.
        WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
      },
      profiles[0],
    );
    children.push(ours);
    const refPort = await freePort();
    const reference = spawnServer(
      "bench/reference/server.ts",
      {
        RPC_URL: info.rpcUrl,
        PRIVATE_KEY: info.facilitatorPrivateKeys[0]!,
        PORT: String(refPort),
        CHAIN_ID: "8453",
      },
      profiles[1],
    );
    children.push(reference);
    await waitFor(`http://127.0.0.1:${ourPort}/supported`);
    await waitFor(`http://127.0.0.1:${refPort}/supported`);

    const sides: {
      name: string;
      url: string;
      pid: number;
      countsDb: boolean;
      headers: Record<string, string>;
      settle: string[];
      steady: string[];
      webhooks: boolean;
    }[] = [
      {
        name: "this service",
        url: `http://127.0.0.1:${ourPort}`,
        pid: ours.pid!,
        countsDb: true,
        headers: { "x-api-key": key },
        settle: oursSettle,
        steady: oursSteady,
        webhooks: true,
      },
      {
        name: "reference",
        url: `http://127.0.0.1:${refPort}`,
        pid: reference.pid!,
        countsDb: false,
        headers: {},
        settle: refSettle,
        steady: refSteady,
        webhooks: false,
      },
    ];
    const verified = await verifyInTurns(
      sides.map((side) => ({ ...side, bodies: verifyBodies })),
      {
        seconds: opts.verifySeconds,
        rounds: opts.verifyRounds,
        warmupSeconds: opts.verifyWarmupSeconds,
        concurrency: opts.verifyConcurrency,
        nodeCommand: NODE_COMMAND,
        progress: opts.progress,
      },
    );
    for (const [sideIndex, side] of sides.entries()) {
      const {
        verify,
        verifyWindows,
        verifyShare,
        payloadsUsed,
        rssAfterVerify,
        onThreads,
        sentInRounds,
        serverCpuSeconds: verifyCpuSeconds,
      } = verified[sideIndex]!;
      say(
        `(b) ${side.name}: /settle ${opts.settleCount} payments, concurrency ${opts.settleConcurrency}…`,
      );
      const settleCpu = measureCpu(side.pid, NODE_COMMAND);
      const cpuBeforeSettle = cpuSecondsOf(side.pid);
      const dbBefore = side.countsDb ? await readDbTraffic(side.url) : undefined;
      // PostgreSQL's own processes, outside the service's CPU figure.
      const postgresCpu = side.countsDb && opts.databaseUrl ? measurePostgresCpu() : undefined;
      const timers = () =>
        side.countsDb ? readHistograms(side.url, STAGE_HISTOGRAMS) : Promise.resolve(undefined);
      const timedBeforeSettle = await timers();
      const settleFrom = monotonicUs();
      const settle = await runLoad({
        url: `${side.url}/settle`,
        headers: side.headers,
        concurrency: opts.settleConcurrency,
        bodies: side.settle,
        capMs: opts.settleCapSeconds * 1000,
        classify: classifySettle,
      });
      const settleWindow = { fromUs: settleFrom, toUs: monotonicUs() };
      say(
        `    ${[...settle.outcomes].map(([k, v]) => `${k}: ${v}`).join(", ")} in ${settle.seconds.toFixed(1)} s`,
      );
      const settleShare = settleCpu();
      const postgresCpuSeconds = postgresCpu?.();
      const cpuAfterSettle = cpuSecondsOf(side.pid);
      const dbAfter = dbBefore ? await readDbTraffic(side.url) : undefined;
      const timedAfterSettle = await timers();
      const rssAfterSettle = peakRssMb(side.pid);
      const deliveredAfterSettle = receiver.received();
      say(
        `(d) ${side.name}: /settle ${opts.steadyCount} payments arriving at ${opts.steadyRatePerSecond} a second…`,
      );
      const steadyFrom = monotonicUs();
      const steady = await runLoad({
        url: `${side.url}/settle`,
        headers: side.headers,
        // Only a bound on what is in flight, never reached while the server
        // keeps up: three seconds of arrivals.
        concurrency: opts.steadyRatePerSecond * 3,
        bodies: side.steady,
        ratePerSecond: opts.steadyRatePerSecond,
        capMs: opts.settleCapSeconds * 1000,
        classify: classifySettle,
      });
      const steadyWindow = { fromUs: steadyFrom, toUs: monotonicUs() };
      const timedAfterSteady = await timers();
      const cpuAfterSteady = cpuSecondsOf(side.pid);
      say(
        `    ${[...steady.outcomes].map(([k, v]) => `${k}: ${v}`).join(", ")} in ${steady.seconds.toFixed(1)} s`,
      );
      measured.push({
        verifyWindows,
        settleWindow,
        steadyWindow,
        verify,
        verifyRepeats: Math.max(0, payloadsUsed - verifyBodies.length),
        settle,
        steady,
        peakRssMb: peakRssMb(side.pid),
        peakRssAfterMb: { verify: rssAfterVerify, settle: rssAfterSettle },
        verifyCpu: verifyShare,
        settleCpu: settleShare,
        cpuMsPer:
          verifyCpuSeconds !== undefined &&
          cpuBeforeSettle !== undefined &&
          cpuAfterSettle !== undefined &&
          cpuAfterSteady !== undefined
            ? {
                verify: (verifyCpuSeconds * 1000) / (verify.outcomes.get("valid") ?? 0),
                settle:
                  ((cpuAfterSettle - cpuBeforeSettle) * 1000) /
                  (settle.outcomes.get("settled") ?? 0),
                steady:
                  ((cpuAfterSteady - cpuAfterSettle) * 1000) /
                  (steady.outcomes.get("settled") ?? 0),
              }
            : undefined,
        dbPerSettle:
          dbBefore && dbAfter
            ? {
                statements: (dbAfter.statements - dbBefore.statements) / settle.count,
                roundTrips: (dbAfter.roundTrips - dbBefore.roundTrips) / settle.count,
              }
            : undefined,
        postgresCpuMsPerSettle:
          postgresCpuSeconds !== undefined && (settle.outcomes.get("settled") ?? 0) > 0
            ? (postgresCpuSeconds * 1000) / (settle.outcomes.get("settled") ?? 0)
            : undefined,
        stageTimes:
          timedBeforeSettle && timedAfterSettle && timedAfterSteady
            ? {
                settle: timeByStage(timedBeforeSettle, timedAfterSettle),
                steady: timeByStage(timedAfterSettle, timedAfterSteady),
              }
            : undefined,
        verifiedOnThreads: onThreads,
        verifySent: sentInRounds,
        webhookDeliveries: side.webhooks
          ? { settle: deliveredAfterSettle, steady: receiver.received() }
          : undefined,
      });
    }
    // Last, with both servers idle: what the chain alone takes a second from
    // this service's own signers at (b)'s concurrency. The service's view of
    // their nonces goes stale, but it is asked nothing more.
    say(
      `the chain's ceiling: ${opts.settleCount} plain transfers from this service's signers, concurrency ${opts.settleConcurrency}…`,
    );
    chainCeilingPerSecond = await chainCeiling(
      info.rpcUrl,
      usdc,
      (info.facilitatorPrivateKeys as Hex[]).slice(1),
      opts.settleCount,
      opts.settleConcurrency,
    );
    say(`    ${chainCeilingPerSecond.toFixed(1)} transfers a second`);
  } finally {
    // SIGTERM, as a supervisor stops them: each exits by itself and Node
    // writes its profile. The receiver stays up until then, for deliveries
    // in flight during shutdown.
    exits = await stopServers(children);
    await receiver.close();
    await devnet.stop();
  }
  const [ours, reference] = measured.map(
    ({ verifyWindows, settleWindow, steadyWindow, postgresCpuMsPerSettle, ...side }, i) => {
      const profile = serverProfile(profiles[i]!.dir, exits[i], [
        { label: "(a) verify", windows: verifyWindows },
        { label: "(b) settle", windows: [settleWindow] },
        { label: "(d) steady settle", windows: [steadyWindow] },
      ]);
      // This service only: the reference keeps no database.
      const threadMs =
        i === 0 ? databaseThreadMs(profile, "(b) settle", !opts.databaseUrl) : undefined;
      const settled = side.settle.outcomes.get("settled") ?? 0;
      return {
        ...side,
        profile,
        dbCpuMsPerSettle:
          postgresCpuMsPerSettle ??
          (threadMs !== undefined && settled > 0 ? threadMs / settled : undefined),
      };
    },
  );
  if (keptProfileDir) say(`CPU profiles kept in ${profileDir}`);
  else rmSync(profileDir, { recursive: true, force: true });
  return { ours: ours!, reference: reference!, profileIntervalUs, chainCeilingPerSecond };
}

export function evmTable(ours: Side, ref: Side, chainCeilingPerSecond?: number): string {
  const p = (r: LoadResult, q: number) => percentile(r.latenciesMs, q);
  const settled = (r: LoadResult) => r.outcomes.get("settled") ?? 0;
  const rate = (r: LoadResult) => settled(r) / r.seconds;
  const nonceFailures = (r: LoadResult) =>
    [...r.outcomes].filter(([k]) => /nonce/i.test(k)).reduce((a, [, v]) => a + v, 0);
  const fmt = (n: number, d = 0) => (Number.isFinite(n) ? n.toFixed(d) : "–");
  const ratio = (a: number, b: number, lowerIsBetter = false) =>
    b === 0 || !Number.isFinite(a) || !Number.isFinite(b)
      ? "–"
      : `${(lowerIsBetter ? b / a : a / b).toFixed(1)}×`;
  const failures = (r: LoadResult) =>
    [...r.outcomes]
      .filter(([k]) => k !== "settled")
      .map(([k, v]) => `${k}: ${v}`)
      .join("; ") || "none";
  const cpu = (c: CpuShare | undefined) =>
    c ? `${c.node.toFixed(2)} / ${c.server.toFixed(2)} / ${c.loadGenerator.toFixed(2)}` : "–";
  /** The same rows for each settle phase; `notes` say how a phase measures them. */
  const settleRows = (
    phase: string,
    pick: (side: Side) => LoadResult,
    notes: { sent?: string; rate?: string; latency?: string } = {},
  ) => {
    const [o, r] = [pick(ours), pick(ref)];
    return [
      [
        `${phase} settled / sent${notes.sent ?? ""}`,
        `${settled(o)} / ${o.count}`,
        `${settled(r)} / ${r.count}`,
        ratio(settled(o), settled(r)),
      ],
      [
        `${phase} settle throughput (settled/s)${notes.rate ?? ""}`,
        fmt(rate(o), 1),
        fmt(rate(r), 1),
        ratio(rate(o), rate(r)),
      ],
      ...[50, 99].map((q) => [
        `${phase} settle p${q} (ms${notes.latency ?? ""})`,
        fmt(p(o, q)),
        fmt(p(r, q)),
        ratio(p(o, q), p(r, q), true),
      ]),
      [`${phase} failures by reason`, failures(o), failures(r), ""],
    ];
  };
  const rows = [
    [
      "(a) valid verifications per second",
      fmt(validPerSecond(ours.verify)),
      fmt(validPerSecond(ref.verify)),
      ratio(validPerSecond(ours.verify), validPerSecond(ref.verify)),
    ],
    [
      "(a) verify requests repeating an earlier payload",
      String(ours.verifyRepeats),
      String(ref.verifyRepeats),
      "",
    ],
    [
      "(a) verifications answered on verify threads (EVM_VERIFY_THREADS)",
      ours.verifiedOnThreads === undefined
        ? "–"
        : `${fmt(ours.verifiedOnThreads || 0)} of ${fmt(ours.verifySent)} sent`,
      "– (one thread)",
      "",
    ],
    [
      "(a) verify p50 (ms)",
      fmt(p(ours.verify, 50), 1),
      fmt(p(ref.verify, 50), 1),
      ratio(p(ours.verify, 50), p(ref.verify, 50), true),
    ],
    [
      "(a) verify p99 (ms)",
      fmt(p(ours.verify, 99), 1),
      fmt(p(ref.verify, 99), 1),
      ratio(p(ours.verify, 99), p(ref.verify, 99), true),
    ],
    ...settleRows("(b)", (side) => side.settle),
    [
      "(b) database statements per settle",
      fmt(ours.dbPerSettle?.statements ?? NaN, 2),
      fmt(ref.dbPerSettle?.statements ?? NaN, 2),
      "",
    ],
    [
      "(b) database round trips per settle",
      fmt(ours.dbPerSettle?.roundTrips ?? NaN, 2),
      fmt(ref.dbPerSettle?.roundTrips ?? NaN, 2),
      "",
    ],
    [
      "(b) database CPU per settlement (ms): the embedded database's thread, or PostgreSQL's processes",
      fmt(ours.dbCpuMsPerSettle ?? NaN, 2),
      fmt(ref.dbCpuMsPerSettle ?? NaN, 2),
      "",
    ],
    [
      "the chain's ceiling: plain transfers a second from this service's signers, at (b)'s concurrency, servers idle",
      fmt(chainCeilingPerSecond ?? NaN, 1),
      "",
      "",
    ],
    [
      "(b) settled over the chain's ceiling",
      fmt(rate(ours.settle) / (chainCeilingPerSecond ?? NaN), 2),
      fmt(rate(ref.settle) / (chainCeilingPerSecond ?? NaN), 2),
      "",
    ],
    [
      "(b) where a settle's time went: mean ms per stage, on the service's own timers",
      ours.stageTimes?.settle ?? "–",
      "–",
      "",
    ],
    [
      "(b) nonce failures",
      String(nonceFailures(ours.settle)),
      String(nonceFailures(ref.settle)),
      "",
    ],
    [
      "webhook deliveries received by the end of (b) / of (d)",
      deliveries(ours.webhookDeliveries, settled(ours.settle), settled(ours.steady)),
      deliveries(ref.webhookDeliveries, settled(ref.settle), settled(ref.steady)),
      "",
    ],
    ...(["verify", "settle", "steady"] as const).map((k) => [
      {
        verify: "(a) server CPU per valid verification (ms)",
        settle: "(b) server CPU per settlement (ms)",
        steady: "(d) server CPU per settlement (ms)",
      }[k],
      fmt(ours.cpuMsPer?.[k] ?? NaN, 2),
      fmt(ref.cpuMsPer?.[k] ?? NaN, 2),
      // A cost: how much of the reference's CPU this service spends.
      Number.isFinite((ours.cpuMsPer?.[k] ?? NaN) / (ref.cpuMsPer?.[k] ?? NaN))
        ? `${(ours.cpuMsPer![k] / ref.cpuMsPer![k]).toFixed(2)}× the reference's`
        : "–",
    ]),
    [
      "(a) CPU cores busy: node / server / load generator",
      cpu(ours.verifyCpu),
      cpu(ref.verifyCpu),
      "",
    ],
    [
      "(b) CPU cores busy: node / server / load generator",
      cpu(ours.settleCpu),
      cpu(ref.settleCpu),
      "",
    ],
    ...settleRows("(d)", (side) => side.steady, {
      sent: ", arriving at a steady rate",
      rate: " (first arrival to last answer)",
      latency: ", from each payment's due time",
    }),
    [
      "(d) where a settle's time went: mean ms per stage, on the service's own timers",
      ours.stageTimes?.steady ?? "–",
      "–",
      "",
    ],
    [
      "(c) peak RSS by the end of (a) / (b) / (d) (MB)",
      `${fmt(ours.peakRssAfterMb.verify)} / ${fmt(ours.peakRssAfterMb.settle)} / ${fmt(ours.peakRssMb)}`,
      `${fmt(ref.peakRssAfterMb.verify)} / ${fmt(ref.peakRssAfterMb.settle)} / ${fmt(ref.peakRssMb)}`,
      "",
    ],
    [
      "(c) peak RSS (MB)",
      fmt(ours.peakRssMb),
      fmt(ref.peakRssMb),
      ratio(ours.peakRssMb, ref.peakRssMb, true),
    ],
  ];
  return [
    "| scenario | this service | reference | ratio (higher = we are better) |",
    "|---|---|---|---|",
    ...rows.map((r) => `| ${r.join(" | ")} |`),
  ].join("\n");
}

/** "delivered of settled" at the end of (b) and of (d), the settled counted from the start of (b). */
function deliveries(received: Side["webhookDeliveries"], settled: number, steady: number): string {
  if (!received) return "– (no webhooks)";
  return `${received.settle} of ${settled} / ${received.steady} of ${settled + steady}`;
}
