/**
 * The NEAR, XRP Ledger and Starknet settle benchmarks: this service alone
 * (no official facilitator exists for these families), compiled, against
 * the family's local ledger at its normal interval (a block or ledger close
 * every second), in the same process as this bench.
 *
 * For each family: distinct payments signed with the project's own client
 * scheme, POSTed to /settle at concurrency 100, then the money checked: the
 * payTo's balance on the ledger rose by exactly what was settled, and the
 * service's database holds one `succeeded` settlement per payment.
 *
 * Payers: NEAR and the XRP Ledger number each payment from the payer's
 * account (a delegate action's nonce, a Payment's Sequence), read from the
 * ledger when it is signed, so a payer signs its next payment only once its
 * last one is included; the bench gives every payment a payer of its own.
 * A Starknet outside execution carries a random nonce of the payer's
 * choosing, so a few payers sign many payments each.
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { PaymentRequirements, SchemeNetworkClient } from "@x402/core/types";
import { KeyPair, type KeyPairString } from "@near-js/crypto";
import { JsonRpcProvider } from "@near-js/providers";
import { Client, Wallet } from "xrpl";
import { Account, RpcProvider } from "starknet";
import BigNumber from "bignumber.js";
import { NEAR_MAINNET, startNearLedger } from "../devnet/near/index.js";
import { XRPL_MAINNET, startXrplLedger } from "../devnet/xrpl/index.js";
import { STARKNET_MAINNET, startStarknetLedger } from "../devnet/starknet/index.js";
import { nearService } from "../devnet/near/service.js";
import { xrplService } from "../devnet/xrpl/service.js";
import { starknetService } from "../devnet/starknet/service.js";
import { ExactNearClientScheme } from "../src/chains/near/clients/exactClient.js";
import { ExactXrplClientScheme } from "../src/chains/xrpl/clients/exactClient.js";
import { ExactStarknetClientScheme } from "../src/chains/starknet/clients/exactClient.js";
import { STARKNET_USDC } from "../src/chains/starknet/networks.js";
import { openMigratedDb } from "../src/storage/db.js";
import { createAccount } from "../src/features/accounts/accounts.js";
import { setAccountPlan } from "../src/features/plans/quotaLedger.js";
import { createApiKey } from "../src/features/keys/apiKeys.js";
import { percentile, runLoad, type LoadResult } from "./load.js";
import { cpuSecondsOf } from "./cpuShare.js";
import { monotonicUs } from "./cpuProfile.js";
import { serverProfile } from "./serverProfile.js";
import {
  classifySettle,
  freePort,
  peakRssMb,
  spawnServer,
  stopServers,
  waitFor,
} from "./harness.js";

export type FamilyName = "near" | "xrpl" | "starknet";

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
  settleCpuMs: number | undefined;
  peakRssMb: number;
  blockMs: number;
  perBlock: number | undefined;
  /** The payTo's balance rise, and what the settled payments add up to, in the asset's units. */
  received: string;
  settledSum: string;
  /** `succeeded` settlements of the network in the service's database. */
  succeededRows: number;
}

/** A family's ledger, started with its payers, and what the bench needs of it. */
interface RunningFamily {
  title: string;
  network: string;
  setup: string;
  blockMs: number;
  /**
   * Transactions the ledger includes per block, from its code; undefined
   * when it has no limit (every transaction waiting goes into the next
   * block), and then the ceiling is ours, not the ledger's.
   */
  perBlock: number | undefined;
  /** The service's environment for this family alone. */
  env: Record<string, string>;
  /** Registered to receive the asset (NEAR: with the token; XRPL: an RLUSD trust line). */
  payTo: string;
  asset: string;
  amount: string;
  extra: Record<string, unknown>;
  maxTimeoutSeconds: number;
  /** One client scheme per payment (NEAR, XRPL) or a few shared round-robin (Starknet). */
  schemes: SchemeNetworkClient[];
  /** The payTo's balance on the ledger, in the asset's units. */
  balance(): BigNumber;
  /** What `count` settled payments of `amount` add up to, in the same units. */
  sumOf(count: number): BigNumber;
  stop(): Promise<void>;
}

const BLOCK_MS = 1000;
/**
 * What each payment allows, and the service then bounds its validity window
 * by: a minute, as the examples ask. Every payment is signed before the run
 * starts, so the last ones wait the whole run before they are sent; a family
 * whose 1,000 settles take longer than that asks for more.
 */
const MAX_TIMEOUT_SECONDS = 60;

async function startNear(count: number): Promise<RunningFamily> {
  const relayers = 2;
  const running = await startNearLedger({ blockMs: BLOCK_MS, payers: count, relayers });
  const { info } = running;
  const provider = new JsonRpcProvider({ url: info.rpcUrl });
  const usdc = running.ledger.token(info.assets.USDC)!;
  return {
    title: "NEAR",
    network: NEAR_MAINNET,
    setup: `local NEAR ledger (a block every ${BLOCK_MS} ms, USDC's NEP-141 contract); ${count} payers, one payment each; ${relayers} relayer accounts for the service`,
    blockMs: BLOCK_MS,
    // NearLedger.produce takes the whole pool into each block.
    perBlock: undefined,
    env: nearService.env(running),
    payTo: info.payTo,
    asset: info.assets.USDC,
    amount: "10000",
    extra: {},
    maxTimeoutSeconds: MAX_TIMEOUT_SECONDS,
    schemes: info.payers.map(
      (p) =>
        new ExactNearClientScheme(p.accountId, KeyPair.fromString(p.secretKey as KeyPairString), {
          provider,
        }),
    ),
    balance: () => new BigNumber(usdc.balanceOf(info.payTo).toString()),
    sumOf: (n) => new BigNumber(10000).times(n),
    stop: () => running.stop(),
  };
}

async function startXrpl(count: number): Promise<RunningFamily> {
  const running = await startXrplLedger({ closeMs: BLOCK_MS, payers: count });
  const { info } = running;
  // One connection for all the signing: the scheme opens one per payment otherwise.
  const client = new Client(info.wsUrl);
  await client.connect();
  const issuer = info.issuers.RLUSD;
  const amount = "0.01";
  return {
    title: "XRP Ledger",
    network: XRPL_MAINNET,
    setup: `local XRP Ledger (a ledger closes every ${BLOCK_MS} ms); RLUSD; ${count} payers, one payment each (each pays its own fee; the service holds no keys)`,
    blockMs: BLOCK_MS,
    // XrplLedger.submit applies to the open ledger at once; close() validates all of it.
    perBlock: undefined,
    env: xrplService.env(running),
    payTo: info.payTo,
    asset: info.assets.RLUSD,
    amount,
    extra: { issuer },
    maxTimeoutSeconds: MAX_TIMEOUT_SECONDS,
    schemes: info.payerSeeds.map(
      (seed) => new ExactXrplClientScheme(Wallet.fromSeed(seed), { client }),
    ),
    balance: () =>
      new BigNumber(running.ledger.issuedBalance(info.payTo, issuer, info.assets.RLUSD)),
    sumOf: (n) => new BigNumber(amount).times(n),
    async stop() {
      await client.disconnect();
      await running.stop();
    },
  };
}

async function startStarknet(count: number): Promise<RunningFamily> {
  const payers = Math.min(20, count);
  const executors = 2;
  const running = await startStarknetLedger({ blockMs: BLOCK_MS, payers, executors });
  const { info } = running;
  const provider = new RpcProvider({ nodeUrl: info.rpcUrl });
  return {
    title: "Starknet",
    network: STARKNET_MAINNET,
    setup: `local Starknet (a block every ${BLOCK_MS} ms); USDC, maxTimeoutSeconds 600; ${payers} payers, ${count / payers} payments each (SNIP-9 outside executions, random nonces); ${executors} executor accounts for the service`,
    blockMs: BLOCK_MS,
    // StarknetLedger.produceBlock takes the whole mempool into each block.
    perBlock: undefined,
    env: starknetService.env(running),
    payTo: info.payTo,
    asset: info.assets.USDC,
    amount: "10000",
    extra: {},
    // Settles here run at a few a second: 1,000 take minutes, and an outside
    // execution signed before the run lapses at now + maxTimeoutSeconds.
    maxTimeoutSeconds: 600,
    schemes: info.payers.map(
      (p) =>
        new ExactStarknetClientScheme(
          new Account({ provider, address: p.address, signer: p.privateKey, cairoVersion: "1" }),
        ),
    ),
    balance: () => new BigNumber(running.ledger.balanceOf(STARKNET_USDC, info.payTo).toString()),
    sumOf: (n) => new BigNumber(10000).times(n),
    stop: () => running.stop(),
  };
}

const STARTERS: Record<FamilyName, (count: number) => Promise<RunningFamily>> = {
  near: startNear,
  xrpl: startXrpl,
  starknet: startStarknet,
};

async function signAll(family: RunningFamily, requirements: PaymentRequirements, n: number) {
  const out: string[] = [];
  // A few at a time: NEAR and XRPL schemes read the payer's nonce or
  // sequence and the head from the ledger, which answers in this process.
  for (let i = 0; i < n; i += 50) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(50, n - i) }, (_, j) =>
        family.schemes[(i + j) % family.schemes.length]!.createPaymentPayload(2, requirements),
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

export async function runFamilyBench(
  name: FamilyName,
  opts: FamilyBenchOptions,
): Promise<FamilyResult> {
  const say = opts.progress;
  say(`${name}: starting the local ledger with ${opts.settleCount} payments' payers…`);
  const family = await STARTERS[name](opts.settleCount);
  const children: ChildProcess[] = [];
  try {
    const dataDir = mkdtempSync(join(tmpdir(), `bench-${name}-`));
    const seeded = await openMigratedDb({ dataDir: join(dataDir, "pglite") });
    const account = await createAccount(seeded.db, "bench");
    await setAccountPlan(seeded.db, account.id, "max");
    const key = await createApiKey(seeded.db, account.id, "bench");
    await seeded.close();

    const port = await freePort();
    // Profiled as the EVM bench profiles (one sample every 5 ms): the share
    // of a settle's CPU that is the family's own cryptography.
    const profileDir = mkdtempSync(join(tmpdir(), `bench-${name}-profile-`));
    const server = spawnServer(
      "src/main.ts",
      {
        ...family.env,
        DATA_DIR: dataDir,
        HOST: "127.0.0.1",
        PORT: String(port),
        LOG_LEVEL: "error",
        // Limits on, as in production, far above the load (see evm.ts).
        RATE_LIMIT_PLAN_MAX: "1000000",
      },
      { dir: profileDir, intervalUs: 5_000 },
    );
    children.push(server);
    const url = `http://127.0.0.1:${port}`;
    await waitFor(`${url}/supported`);

    // What the service asks payers to bind (Starknet: the executor as
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
      maxTimeoutSeconds: family.maxTimeoutSeconds,
      extra: { ...kind.extra, ...family.extra },
    } as PaymentRequirements;

    say(`${name}: signing ${opts.settleCount} payments…`);
    const bodies = await signAll(family, requirements, opts.settleCount);
    const balanceBefore = family.balance();
    say(`${name}: settling at concurrency ${opts.concurrency}…`);
    const cpuBefore = cpuSecondsOf(server.pid!);
    const settleFrom = monotonicUs();
    const benchCpuBefore = process.cpuUsage();
    const settle = await runLoad({
      url: `${url}/settle`,
      headers: { "x-api-key": key.key },
      concurrency: opts.concurrency,
      bodies,
      capMs: 300_000,
      classify: classifySettle,
    });
    const cpuAfter = cpuSecondsOf(server.pid!);
    const settleWindow = { fromUs: settleFrom, toUs: monotonicUs() };
    const benchCpu = process.cpuUsage(benchCpuBefore);
    const rss = peakRssMb(server.pid!);
    say(
      `    ${[...settle.outcomes].map(([k, v]) => `${k}: ${v}`).join(", ")} in ${settle.seconds.toFixed(1)} s`,
    );
    // A settled payment is in a block, so this is final once the answers are in.
    const received = family.balance().minus(balanceBefore);
    const settled = settle.outcomes.get("settled") ?? 0;
    const [exit] = await stopServers(children);
    children.length = 0;
    const profile = serverProfile(profileDir, exit, [{ label: "settle", windows: [settleWindow] }]);
    rmSync(profileDir, { recursive: true, force: true });
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
      settleCpuMs:
        cpuBefore !== undefined && cpuAfter !== undefined && settled > 0
          ? ((cpuAfter - cpuBefore) * 1000) / settled
          : undefined,
      peakRssMb: rss,
      blockMs: family.blockMs,
      perBlock: family.perBlock,
      received: received.toFixed(),
      settledSum: family.sumOf(settled).toFixed(),
      succeededRows,
    };
  } finally {
    await stopServers(children);
    await family.stop();
  }
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
  if (r.received !== r.settledSum) {
    problems.push(
      `${r.title}: the payTo received ${r.received}, the settled payments add up to ${r.settledSum}`,
    );
  }
  if (r.succeededRows !== settled) {
    problems.push(
      `${r.title}: the database holds ${r.succeededRows} succeeded settlements on ${r.network}, ${settled} settled`,
    );
  }
  return problems;
}

export function familyTable(results: readonly FamilyResult[]): string {
  const p = (r: LoadResult, q: number) => percentile(r.latenciesMs, q).toFixed(0);
  const settled = (r: FamilyResult) => r.settle.outcomes.get("settled") ?? 0;
  const rate = (r: FamilyResult) => settled(r) / r.settle.seconds;
  const ceiling = (r: FamilyResult) =>
    r.perBlock === undefined ? undefined : (r.perBlock * 1000) / r.blockMs;
  const row = (label: string, cell: (r: FamilyResult) => string) =>
    `| ${label} | ${results.map(cell).join(" | ")} |`;
  return [
    `| | ${results.map((r) => r.title).join(" | ")} |`,
    `| --- | ${results.map(() => "---").join(" | ")} |`,
    row("settled / sent", (r) => `${settled(r)} / ${r.settle.sent}`),
    row("settled per second", (r) => rate(r).toFixed(1)),
    row("settle p50 / p99 (ms)", (r) => `${p(r.settle, 50)} / ${p(r.settle, 99)}`),
    row("server CPU per settlement (ms)", (r) => r.settleCpuMs?.toFixed(2) ?? "–"),
    row("of which signatures and hashing (the family's cryptography)", (r) =>
      typeof r.cryptoShare === "number"
        ? `${(r.cryptoShare * 100).toFixed(0)}%${r.settleCpuMs === undefined ? "" : ` (${(r.cryptoShare * r.settleCpuMs).toFixed(2)} ms)`}`
        : r.cryptoShare,
    ),
    row("the ledger's and load generator's CPU per settlement (ms)", (r) =>
      r.ledgerCpuMs === undefined ? "–" : r.ledgerCpuMs.toFixed(2),
    ),
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
    row("succeeded rows in the database", (r) => String(r.succeededRows)),
    "",
    ...results.map(
      (r) =>
        `Outcomes, ${r.title}: ${[...r.settle.outcomes].map(([k, v]) => `${k} ${v}`).join(", ")}.`,
    ),
    "",
  ].join("\n");
}
