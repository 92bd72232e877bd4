/**
 * The settle benchmark of each family whose devnet descriptor has a bench
 * side (devnet/families.ts): this service alone (no official facilitator
 * exists for these families), compiled, against the family's local ledger
 * at its normal interval (a block or ledger close every second), in the
 * same process as this bench.
 *
 * For each family: distinct payments signed with the project's own client
 * scheme, POSTed to /settle at concurrency 100, then the money checked: the
 * payTo's balance on the ledger rose by exactly what was settled, and the
 * service's database holds one `succeeded` settlement per payment.
 *
 * What differs by family (its payers, client scheme, balance read and block
 * times) is its devnet's bench side (devnet/<family>/bench.ts); this file
 * names no family.
 */
import type { ChildProcess } from "node:child_process";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import type { PaymentRequirements } from "@x402/core/types";
import BigNumber from "bignumber.js";
import { devnetFamilies, type DevnetNamespace } from "../devnet/families.js";
import type { BenchLedger } from "../devnet/family.js";
import { openMigratedDb } from "../src/storage/db.js";
import { seedBenchAccount } from "./benchAccount.js";
import { mergeLoadResults, percentile, runLoad, type LoadResult } from "./load.js";
import { cpuSecondsOf } from "./cpuShare.js";
import { monotonicUs } from "./cpuProfile.js";
import { serverProfile } from "./serverProfile.js";
import { databaseThreadMs } from "./databaseCpu.js";
import {
  classifySettle,
  freePort,
  peakRssMb,
  readDbTraffic,
  readHistograms,
  spawnServer,
  STAGE_HISTOGRAMS,
  stopServers,
  timeByStage,
  type DbTraffic,
  waitFor,
} from "./harness.js";

/** The families with a settle benchmark, in the table's order. */
export const BENCHED_FAMILIES = devnetFamilies()
  .filter(([, family]) => family.bench !== undefined)
  .map(([namespace]) => namespace);

export type FamilyName = DevnetNamespace;

interface FamilyBenchOptions {
  settleCount: number;
  concurrency: number;
  progress: (line: string) => void;
}

export interface FamilyResult {
  title: string;
  /**
   * The share of the server's busy time in the settle run spent in
   * signatures and hashing (the family's cryptography), from a CPU profile;
   * or why there is none.
   */
  cryptoShare: number | string;
  /** CPU ms per settlement of the bench's own process: the ledger and the load generator. */
  ledgerCpuMs: number | undefined;
  network: string;
  /** How the ledger runs, the payers and the service's keys, for the header. */
  setup: string;
  settle: LoadResult;
  /**
   * Open arrivals at half the closed loop's rate, as independent customers
   * arrive: latency counts from each payment's due time.
   */
  open: { ratePerSecond: number; settle: LoadResult };
  /**
   * Per settled payment of the closed loop, ms from the close of the block or
   * ledger that included it to its answer at the load generator, sorted;
   * undefined where the ledger does not say when it closed.
   */
  afterBlockMs: number[] | undefined;
  /** The same for the open arrivals' settled payments. */
  openAfterBlockMs: number[] | undefined;
  settleCpuMs: number | undefined;
  /**
   * How late the load generator's thread ran its timers during the closed
   * loop (p99 and max, ms): what its timing of each answer may be late by.
   */
  loadLoopDelayMs: { p99: number; max: number };
  peakRssMb: number;
  blockMs: number;
  perBlock: number | undefined;
  /** The payTo's balance rise, and what the settled payments add up to, in the asset's units. */
  received: string;
  settledSum: string;
  /** `succeeded` settlements of the network in the service's database, the warm-up's included. */
  succeededRows: number;
  /** Payments the unmeasured warm-up settled before the closed loop. */
  warmSettled: number;
  /** The service's database statements and round trips per settlement of the closed loop. */
  dbPerSettle: DbTraffic | undefined;
  /** The embedded database's thread's busy ms per settlement of the closed loop, from the CPU profile. */
  dbCpuMsPerSettle: number | undefined;
  /** The closed loop's mean time per settle stage, from the service's own timers (`timeByStage`). */
  stageTimes: string;
}

const BLOCK_MS = 1000;

/** Settles before the measured runs, to warm the service up: two rounds of the closed loop. */
export const warmUpCount = (opts: { settleCount: number; concurrency: number }) =>
  Math.min(opts.settleCount, 2 * opts.concurrency);
/**
 * What each payment allows, and the service then bounds its validity window
 * by: a minute, as the examples ask. Payments are signed shortly before
 * their turn (`signedAhead`, and the open arrivals' slices), so none waits
 * long enough to lapse.
 */
const MAX_TIMEOUT_SECONDS = 60;
/** Open arrivals are signed and sent in slices of this many seconds of arrivals. */
const OPEN_SLICE_SECONDS = 8;

/** A family's ledger for the bench, through its devnet descriptor. */
async function startFamily(name: FamilyName, payers: number): Promise<BenchLedger> {
  const family = devnetFamilies().find(([namespace]) => namespace === name)?.[1];
  if (!family?.bench) throw new Error(`${name} has no settle benchmark`);
  return family.bench(payers, BLOCK_MS);
}

/** `n` payments, from the payers after the first `from` (each payer of its own where one is needed). */
async function signAll(
  family: BenchLedger,
  requirements: PaymentRequirements,
  n: number,
  from = 0,
) {
  const out: string[] = [];
  // A few at a time: some schemes read the payer's nonce or sequence and
  // the head from the ledger, which answers in this process.
  for (let i = 0; i < n; i += 50) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(50, n - i) }, (_, j) =>
        family.sign(from + i + j, requirements),
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

/**
 * The closed loop's `n` bodies, signed in batches of 50 as the loop gets
 * within `ahead` of them, the first `ahead` before it starts. A payment's
 * validity starts when it is signed (an XRPL payment lapses 20 ledgers
 * after), so 1,000 signed at once could lapse before a slow loop reaches
 * the last of them.
 */
function signedAhead(
  family: BenchLedger,
  requirements: PaymentRequirements,
  n: number,
  ahead: number,
): { ready: () => Promise<unknown>; take: (i: number) => Promise<string> } {
  const bodies: Promise<string>[] = [];
  // One batch at a time, as signAll signs: some schemes read the ledger.
  let signing: Promise<unknown> = Promise.resolve();
  const extend = (to: number) => {
    while (bodies.length < Math.min(n, to)) {
      const from = bodies.length;
      const count = Math.min(50, n - from);
      const batch = signing.then(() => signAll(family, requirements, count, from));
      signing = batch;
      for (let j = 0; j < count; j++) bodies.push(batch.then((b) => b[j]!));
    }
  };
  return {
    ready: () => {
      extend(ahead);
      return Promise.all(bodies);
    },
    take: (i) => {
      extend(i + ahead);
      return bodies[i]!;
    },
  };
}

export async function runFamilyBench(
  name: FamilyName,
  opts: FamilyBenchOptions,
): Promise<FamilyResult> {
  const say = opts.progress;
  const warmCount = warmUpCount(opts);
  const payments = 2 * opts.settleCount + warmCount;
  say(`${name}: starting the local ledger with ${payments} payments' payers…`);
  // The closed loop's payments, as many again for the open arrivals, then the warm-up's.
  const family = await startFamily(name, payments);
  const children: ChildProcess[] = [];
  try {
    const dataDir = mkdtempSync(join(tmpdir(), `bench-${name}-`));
    const seeded = await openMigratedDb({ dataDir: join(dataDir, "pglite") });
    const { key } = await seedBenchAccount(seeded.db);
    await seeded.close();

    const port = await freePort();
    // Profiled as the side-by-side benches profile (one sample every 5 ms): the share
    // of a settle's CPU that is the family's own cryptography.
    const profileDir = mkdtempSync(join(tmpdir(), `bench-${name}-profile-`));
    const server = spawnServer(
      "src/main.ts",
      {
        ...family.env,
        DATA_DIR: dataDir,
        HOST: "127.0.0.1",
        PORT: String(port),
        // Production mode, scraped on loopback without a token.
        METRICS_PUBLIC: "true",
        LOG_LEVEL: "error",
        // Limits on, as in production, far above the load (as in the side-by-side benches).
        RATE_LIMIT_PLAN_MAX: "1000000",
      },
      { dir: profileDir, intervalUs: 5_000 },
    );
    children.push(server);
    const url = `http://127.0.0.1:${port}`;
    await waitFor(`${url}/supported`);

    // What the service asks payers to bind (a family's executor as
    // `extra.feePayer`), as a resource server copies it from /supported.
    const supported = (await (await fetch(`${url}/supported`)).json()) as {
      kinds: { network: string; scheme: string; extra?: Record<string, unknown> }[];
    };
    const kind = supported.kinds.find((k) => k.network === family.network && k.scheme === "exact");
    if (!kind) throw new Error(`${url}/supported does not list exact on ${family.network}`);
    const requirements = {
      scheme: "exact",
      network: family.network,
      asset: family.asset,
      amount: family.amount,
      payTo: family.payTo,
      maxTimeoutSeconds: family.maxTimeoutSeconds ?? MAX_TIMEOUT_SECONDS,
      extra: { ...kind.extra, ...family.extra },
    } as PaymentRequirements;

    // Unmeasured: a service just started runs its first few hundred settles
    // through code V8 has not yet compiled (the first ledgers of an XRPL run
    // were answered 130 to 280 ms after their close, the later ones within
    // 150 ms), and a service in use has long been warm. The verify benches
    // warm up the same way.
    say(`${name}: warming the service up with ${warmCount} settles (not measured)…`);
    const warm = await runLoad({
      url: `${url}/settle`,
      headers: { "x-api-key": key },
      concurrency: opts.concurrency,
      bodies: await signAll(family, requirements, warmCount, 2 * opts.settleCount),
      capMs: 300_000,
      classify: classifySettle,
    });
    const warmSettled = warm.outcomes.get("settled") ?? 0;

    // Twice the concurrency ahead of the loop: enough that a worker never
    // waits for a signature while the ledger keeps up. A family whose
    // payments outlive the run has every one signed before it starts, so no
    // payer's signing shares the machine with the service while it is
    // measured (payers sign on machines of their own).
    const ahead = family.signedBeforeRun ? opts.settleCount : 2 * opts.concurrency;
    const bodies = signedAhead(family, requirements, opts.settleCount, ahead);
    say(`${name}: signing the first ${ahead} of ${opts.settleCount} payments…`);
    await bodies.ready();
    const openSigned = family.signedBeforeRun
      ? await signAll(family, requirements, opts.settleCount, opts.settleCount)
      : undefined;
    const balanceBefore = new BigNumber(await family.balance());
    say(`${name}: settling at concurrency ${opts.concurrency}…`);
    // When each settled payment's answer arrived, to set against its block's close.
    const answeredAt: [string, number][] = [];
    const dbBefore = await readDbTraffic(url);
    const stagesBefore = await readHistograms(url, STAGE_HISTOGRAMS);
    const cpuBefore = cpuSecondsOf(server.pid!);
    const settleFrom = monotonicUs();
    const benchCpuBefore = process.cpuUsage();
    // The load generator times each answer as its thread reads it: a thread
    // held by other work (a ledger or payers sharing it) times answers late.
    const loopDelay = monitorEventLoopDelay({ resolution: 5 });
    loopDelay.enable();
    const settle = await runLoad({
      url: `${url}/settle`,
      headers: { "x-api-key": key },
      concurrency: opts.concurrency,
      nextBody: { count: opts.settleCount, take: bodies.take },
      capMs: 300_000,
      classify: noteAnswers(answeredAt),
    });
    loopDelay.disable();
    const cpuAfter = cpuSecondsOf(server.pid!);
    const settleWindow = { fromUs: settleFrom, toUs: monotonicUs() };
    const benchCpu = process.cpuUsage(benchCpuBefore);
    const dbAfter = await readDbTraffic(url);
    const stageTimes = timeByStage(stagesBefore, await readHistograms(url, STAGE_HISTOGRAMS));
    const rss = peakRssMb(server.pid!);
    say(
      `    ${[...settle.outcomes].map(([k, v]) => `${k}: ${v}`).join(", ")} in ${settle.seconds.toFixed(1)} s`,
    );
    const includedAt = family.includedAt;
    const sinceBlock = (answers: [string, number][]) =>
      includedAt
        ? answers
            .map(([tx, at]) => at - (includedAt(tx) ?? NaN))
            .filter(Number.isFinite)
            .sort((a, b) => a - b)
        : undefined;
    const afterBlockMs = sinceBlock(answeredAt);
    const settled = settle.outcomes.get("settled") ?? 0;

    // Signed a few seconds' worth at a time, just before they are due: a
    // payment's validity starts when it is signed (one may lapse a few
    // blocks after), and the last of 1,000 signed at once would lapse
    // waiting for its turn. Each slice's arrivals are open.
    const openRate = Math.max(1, settled / settle.seconds / 2);
    const slice = Math.max(1, Math.ceil(openRate * OPEN_SLICE_SECONDS));
    say(`${name}: ${opts.settleCount} more, arriving at ${openRate.toFixed(1)} a second…`);
    const slices: LoadResult[] = [];
    const openAnsweredAt: [string, number][] = [];
    for (let done = 0; done < opts.settleCount; done += slice) {
      const n = Math.min(slice, opts.settleCount - done);
      const openBodies =
        openSigned?.slice(done, done + n) ??
        (await signAll(family, requirements, n, opts.settleCount + done));
      slices.push(
        await runLoad({
          url: `${url}/settle`,
          headers: { "x-api-key": key },
          concurrency: 1_000,
          bodies: openBodies,
          ratePerSecond: openRate,
          capMs: 600_000,
          classify: noteAnswers(openAnsweredAt),
        }),
      );
    }
    const open = mergeLoadResults(slices);
    say(
      `    ${[...open.outcomes].map(([k, v]) => `${k}: ${v}`).join(", ")} in ${open.seconds.toFixed(1)} s`,
    );
    // A settled payment is in a block, so this is final once the answers are in.
    const received = new BigNumber(await family.balance()).minus(balanceBefore);
    const settledAll = settled + (open.outcomes.get("settled") ?? 0);
    const [exit] = await stopServers(children);
    children.length = 0;
    const profile = serverProfile(profileDir, exit, [{ label: "settle", windows: [settleWindow] }]);
    // Kept where BENCH_CPU_PROFILE_DIR asks, for `bench/profile-summary.ts`.
    const keep = process.env["BENCH_CPU_PROFILE_DIR"];
    if (keep) cpSync(profileDir, keep, { recursive: true });
    rmSync(profileDir, { recursive: true, force: true });
    const dbThreadMs = databaseThreadMs(profile, "settle", true);
    const cryptoShare = profile.ok
      ? profile.overall.byCategory
          .filter((c) => c.key.startsWith("signatures") || c.key.startsWith("hashing"))
          .reduce((sum, c) => sum + c.share, 0)
      : profile.why;

    const after = await openMigratedDb({ dataDir: join(dataDir, "pglite") });
    let succeededRows: number;
    try {
      const row = await after.db
        .selectFrom("settlements")
        .select((eb) => eb.fn.countAll<string>().as("n"))
        .where("network", "=", family.network)
        .where("status", "=", "succeeded")
        .executeTakeFirstOrThrow();
      succeededRows = Number(row.n);
    } finally {
      await after.close();
    }
    return {
      title: family.title,
      cryptoShare,
      ledgerCpuMs: settled > 0 ? (benchCpu.user + benchCpu.system) / 1000 / settled : undefined,
      network: family.network,
      setup: family.setup,
      settle,
      open: { ratePerSecond: openRate, settle: open },
      afterBlockMs,
      openAfterBlockMs: sinceBlock(openAnsweredAt),
      loadLoopDelayMs: { p99: loopDelay.percentile(99) / 1e6, max: loopDelay.max / 1e6 },
      settleCpuMs:
        cpuBefore !== undefined && cpuAfter !== undefined && settled > 0
          ? ((cpuAfter - cpuBefore) * 1000) / settled
          : undefined,
      peakRssMb: rss,
      blockMs: BLOCK_MS,
      perBlock: family.perBlock,
      received: received.toFixed(),
      settledSum: new BigNumber(family.amount).times(settledAll).toFixed(),
      succeededRows,
      warmSettled,
      dbPerSettle:
        settled > 0
          ? {
              statements: (dbAfter.statements - dbBefore.statements) / settled,
              roundTrips: (dbAfter.roundTrips - dbBefore.roundTrips) / settled,
            }
          : undefined,
      dbCpuMsPerSettle: dbThreadMs !== undefined && settled > 0 ? dbThreadMs / settled : undefined,
      stageTimes,
    };
  } finally {
    await stopServers(children);
    await family.stop();
  }
}

/** `classifySettle`, noting when each settled payment's answer arrived, to set against its block's close. */
function noteAnswers(into: [string, number][]) {
  return (status: number, json: unknown): string => {
    const label = classifySettle(status, json);
    const tx = (json as { transaction?: unknown } | undefined)?.transaction;
    if (label === "settled" && typeof tx === "string") into.push([tx, performance.now()]);
    return label;
  };
}

/** Why a run does not count: a payment not settled, money or records that do not add up. */
export function familyProblems(r: FamilyResult): string[] {
  const settled = r.settle.outcomes.get("settled") ?? 0;
  const problems: string[] = [];
  if (settled !== r.settle.sent || r.settle.sent === 0) {
    const failures = [...r.settle.outcomes].filter(([k]) => k !== "settled");
    problems.push(
      `${r.title}: ${settled} of ${r.settle.sent} settled (${failures.map(([k, v]) => `${k} ${v}`).join(", ")})`,
    );
  }
  const openSettled = r.open.settle.outcomes.get("settled") ?? 0;
  if (openSettled !== r.open.settle.sent || r.open.settle.sent === 0) {
    const failures = [...r.open.settle.outcomes].filter(([k]) => k !== "settled");
    problems.push(
      `${r.title}, open arrivals: ${openSettled} of ${r.open.settle.sent} settled (${failures.map(([k, v]) => `${k} ${v}`).join(", ")})`,
    );
  }
  if (r.received !== r.settledSum) {
    problems.push(
      `${r.title}: the payTo received ${r.received}, the settled payments add up to ${r.settledSum}`,
    );
  }
  if (r.succeededRows !== settled + openSettled + r.warmSettled) {
    problems.push(
      `${r.title}: the database holds ${r.succeededRows} succeeded settlements on ${r.network}, ${settled + openSettled + r.warmSettled} settled (the warm-up's ${r.warmSettled} included)`,
    );
  }
  return problems;
}

const sinceBlockCell = (ms: number[] | undefined) =>
  ms && ms.length > 0 ? `${percentile(ms, 50).toFixed(0)} / ${percentile(ms, 99).toFixed(0)}` : "–";

/** Transactions a second the ledger takes: its per-block limit over its interval, or unbounded. */
export const ledgerCeiling = (r: FamilyResult): number | "unbounded" =>
  r.perBlock === undefined ? "unbounded" : (r.perBlock * 1000) / r.blockMs;

export function familyTable(results: readonly FamilyResult[]): string {
  const p = (r: LoadResult, q: number) => percentile(r.latenciesMs, q).toFixed(0);
  const settled = (r: FamilyResult) => r.settle.outcomes.get("settled") ?? 0;
  const rate = (r: FamilyResult) => settled(r) / r.settle.seconds;
  const ceiling = (r: FamilyResult) => {
    const c = ledgerCeiling(r);
    return c === "unbounded" ? undefined : c;
  };
  const row = (label: string, cell: (r: FamilyResult) => string) =>
    `| ${label} | ${results.map(cell).join(" | ")} |`;
  return [
    `| | ${results.map((r) => r.title).join(" | ")} |`,
    `| --- | ${results.map(() => "---").join(" | ")} |`,
    row("settled / sent", (r) => `${settled(r)} / ${r.settle.sent}`),
    row("settled per second", (r) => rate(r).toFixed(1)),
    row("settle p50 / p99 (ms)", (r) => `${p(r.settle, 50)} / ${p(r.settle, 99)}`),
    row("answered after the including block closed, p50 / p99 (ms)", (r) =>
      sinceBlockCell(r.afterBlockMs),
    ),
    row(
      "the load generator's own event-loop delay in the closed loop, p99 / max (ms)",
      (r) => `${r.loadLoopDelayMs.p99.toFixed(0)} / ${r.loadLoopDelayMs.max.toFixed(0)}`,
    ),
    row("open arrivals at half the closed loop's rate (a second)", (r) =>
      r.open.ratePerSecond.toFixed(1),
    ),
    row(
      "open arrivals: settled / sent",
      (r) => `${r.open.settle.outcomes.get("settled") ?? 0} / ${r.open.settle.sent}`,
    ),
    row(
      "open arrivals: settle p50 / p99 (ms)",
      (r) => `${p(r.open.settle, 50)} / ${p(r.open.settle, 99)}`,
    ),
    row("open arrivals: answered after the including block closed, p50 / p99 (ms)", (r) =>
      sinceBlockCell(r.openAfterBlockMs),
    ),
    row("server CPU per settlement (ms)", (r) => r.settleCpuMs?.toFixed(2) ?? "–"),
    row("of which signatures and hashing (the family's cryptography)", (r) =>
      typeof r.cryptoShare === "number"
        ? `${(r.cryptoShare * 100).toFixed(0)}%${r.settleCpuMs === undefined ? "" : ` (${(r.cryptoShare * r.settleCpuMs).toFixed(2)} ms)`}`
        : r.cryptoShare,
    ),
    row("the ledger's and load generator's CPU per settlement (ms)", (r) =>
      r.ledgerCpuMs === undefined ? "–" : r.ledgerCpuMs.toFixed(2),
    ),
    row("database statements / round trips per settlement", (r) =>
      r.dbPerSettle
        ? `${r.dbPerSettle.statements.toFixed(2)} / ${r.dbPerSettle.roundTrips.toFixed(2)}`
        : "–",
    ),
    row("database CPU per settlement (ms): the embedded database's thread", (r) =>
      r.dbCpuMsPerSettle === undefined ? "–" : r.dbCpuMsPerSettle.toFixed(2),
    ),
    row("mean time per settle stage (ms)", (r) => r.stageTimes),
    row("peak RSS (MB)", (r) => r.peakRssMb.toFixed(0)),
    row("block / ledger interval (ms)", (r) => String(r.blockMs)),
    row("ledger ceiling (tx per second)", (r) => {
      const c = ceiling(r);
      return c === undefined ? "unbounded (no per-block limit)" : c.toFixed(0);
    }),
    row("settled per second, share of the ceiling", (r) => {
      const c = ceiling(r);
      return c === undefined ? "n/a" : `${((rate(r) / c) * 100).toFixed(0)}%`;
    }),
    row("payTo received = settled sum", (r) => `${r.received} = ${r.settledSum}`),
    row(
      "succeeded rows in the database (the warm-up's included)",
      (r) => `${r.succeededRows} (${r.warmSettled})`,
    ),
    "",
    ...results.map(
      (r) =>
        `Outcomes, ${r.title}: ${[...r.settle.outcomes].map(([k, v]) => `${k} ${v}`).join(", ")}.`,
    ),
    "",
  ].join("\n");
}
