/**
 * Discovery catalog benchmark: 10,000 varied entries seeded through the
 * catalog repository, then GET /discovery/resources and GET /discovery/search
 * over HTTP at concurrency 32 against the whole service started in-process
 * (createService on a devnet), as `npm start` runs it.
 *
 * Each endpoint is measured twice:
 * - "popular": requests cycle through 40 pages or queries, the way many
 *   clients ask for the same first pages, so the read cache answers most
 *   (entries are fresh 5 s, then refreshed in the background);
 * - "distinct": every request is a new page or query, so each one reaches
 *   the database (the worst case for the cache).
 *
 * The load generator shares the process (and, on PGlite, the one thread)
 * with the service, so the figures include its cost.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { Agent, request } from "undici";
import type { Hex } from "viem";
import type { PaymentRequirements } from "@x402/core/types";
import { startDevnet } from "../devnet/evm/index.js";
import { createService } from "../src/app.js";
import { loadConfig } from "../src/config/index.js";
import { openMigratedDb, type OpenedDb } from "../src/storage/db.js";
import { upsertCatalogEntry } from "../src/features/catalog/catalogRepository.js";
import type { CatalogDraft } from "../src/features/catalog/declaration.js";
import { seededRandom } from "../test/support/seededRandom.js";

export interface CatalogBenchRow {
  name: string;
  p50Ms: number;
  p99Ms: number;
  rps: number;
}

export interface CatalogBenchOptions {
  backend: "pglite" | "postgres";
  /** Server URL for `postgres`; a scratch database is created on it and dropped after. */
  databaseUrl?: string;
  entries?: number;
  concurrency?: number;
  /** Measured time per scenario. */
  durationMs?: number;
  warmupMs?: number;
  progress?: (line: string) => void;
}

const NETWORKS = [
  "eip155:8453",
  "eip155:42161",
  "eip155:10",
  "eip155:137",
  "eip155:43114",
  "eip155:42220",
  "eip155:59144",
  "eip155:130",
  "eip155:480",
  "eip155:143",
];

const TOPICS = (
  "weather forecast tides marine aviation traffic transit parking geocode maps routing " +
  "elevation satellite imagery climate pollution pollen earthquake flood wildfire storm " +
  "stocks equities options futures forex crypto token defi lending yields prices quotes " +
  "earnings filings sentiment news headlines sports scores odds betting fantasy esports " +
  "movies music podcasts books lyrics recipes nutrition fitness sleep health symptoms " +
  "pharmacy genomics protein chemistry physics astronomy math statistics translation " +
  "transcription speech summarize classify embed vector search ranking recommend chat " +
  "image resize upscale background ocr captcha video thumbnails audio denoise voice " +
  "email sms phone verification identity fraud risk credit compliance sanctions kyc " +
  "invoices payroll accounting tax shipping tracking customs freight logistics warehouse " +
  "inventory retail catalog pricing coupons reviews travel flights hotels visas events " +
  "tickets venues jobs resumes salaries realestate listings mortgage insurance legal patents"
).split(/\s+/);
const FILLER = "api data service live real time global fast accurate daily hourly historical".split(
  " ",
);

/** Deterministic, so every run seeds the same catalog. */
const prng = seededRandom;

const pick = <T>(rand: () => number, list: readonly T[]): T =>
  list[Math.floor(rand() * list.length)]!;

function payTo(i: number): string {
  return `0x${(0xa000 + i).toString(16).padStart(40, "0")}`;
}

function entry(i: number, rand: () => number): CatalogDraft {
  const topics = [pick(rand, TOPICS), pick(rand, TOPICS), pick(rand, TOPICS)];
  const mcp = i % 10 === 0;
  const host = `${topics[0]}-${i % 1000}.example.com`;
  const resource = mcp ? `https://${host}/mcp` : `https://${host}/v1/${topics[1]}/${i}`;
  const words = Array.from({ length: 6 + Math.floor(rand() * 10) }, () =>
    rand() < 0.6 ? pick(rand, TOPICS) : pick(rand, FILLER),
  );
  const accept: PaymentRequirements = {
    scheme: "exact",
    network: pick(rand, NETWORKS) as PaymentRequirements["network"],
    asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
    amount: String(1000 + Math.floor(rand() * 1_000_000)),
    payTo: payTo(Math.floor(rand() * 200)),
    maxTimeoutSeconds: 300,
    extra: { name: "USD Coin", version: "2" },
  };
  const method = rand() < 0.7 ? "GET" : "POST";
  return {
    resource,
    toolName: mcp ? `${topics[1]}_${topics[2]}` : "",
    type: mcp ? "mcp" : "http",
    x402Version: 2,
    method: mcp ? undefined : method,
    description: `${topics.join(" ")} ${words.join(" ")}`,
    mimeType: "application/json",
    serviceName: rand() < 0.8 ? `${topics[0]} ${pick(rand, FILLER)}`.slice(0, 32) : undefined,
    tags: rand() < 0.7 ? [...new Set([topics[0]!, topics[2]!])] : undefined,
    accept,
    extensionKeys: rand() < 0.3 ? ["bazaar", "payment-identifier"] : ["bazaar"],
    bazaar: {
      info: mcp
        ? { input: { type: "mcp", toolName: `${topics[1]}_${topics[2]}`, inputSchema: {} } }
        : { input: { type: "http", method, queryParams: { q: topics[1] } } },
      schema: {
        $schema: "https://json-schema.org/draft/2020-12/schema",
        type: "object",
        properties: { input: { type: "object" } },
        required: ["input"],
      },
    },
  };
}

/** Seeds `count` varied entries, the same ones on every run. */
async function seedCatalog(opened: OpenedDb, count: number): Promise<void> {
  const rand = prng(402);
  for (let i = 0; i < count; i++) await upsertCatalogEntry(opened.db, entry(i, rand), null);
}

async function scratchDatabase(adminUrl: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `x402_bench_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const a = new pg.Client({ connectionString: adminUrl });
      await a.connect();
      await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await a.end();
    },
  };
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** Closed loop: `concurrency` workers, each asking again as soon as it is answered. */
async function load(
  base: string,
  path: (i: number) => string,
  concurrency: number,
  durationMs: number,
): Promise<{ latencies: number[]; seconds: number; failures: number }> {
  const agent = new Agent({ connections: concurrency, pipelining: 1 });
  const latencies: number[] = [];
  let failures = 0;
  let next = 0;
  const start = performance.now();
  const deadline = start + durationMs;
  const worker = async () => {
    while (performance.now() < deadline) {
      const url = `${base}${path(next++)}`;
      const t0 = performance.now();
      const res = await request(url, { dispatcher: agent });
      await res.body.arrayBuffer();
      latencies.push(performance.now() - t0);
      if (res.statusCode !== 200) failures++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - start) / 1000;
  await agent.close();
  return { latencies: latencies.sort((a, b) => a - b), seconds, failures };
}

function filters(i: number): string {
  switch (i % 6) {
    case 1:
      return `&network=${encodeURIComponent(NETWORKS[i % NETWORKS.length]!)}`;
    case 2:
      return "&type=mcp";
    case 3:
      return `&payTo=${payTo(i % 200)}`;
    case 4:
      return "&extensions=payment-identifier";
    default:
      return "";
  }
}

function words(i: number, rand: () => number): string {
  const n = 1 + (i % 3);
  return Array.from({ length: n }, () => pick(rand, TOPICS)).join(" ");
}

export async function runCatalogBench(
  opts: CatalogBenchOptions,
): Promise<{ rows: CatalogBenchRow[] }> {
  const entries = opts.entries ?? 10_000;
  const concurrency = opts.concurrency ?? 32;
  const durationMs = opts.durationMs ?? 10_000;
  const warmupMs = opts.warmupMs ?? 2_000;
  const say = opts.progress ?? (() => undefined);

  let scratch: { url: string; drop(): Promise<void> } | undefined;
  if (opts.backend === "postgres") {
    if (!opts.databaseUrl) throw new Error("the postgres backend needs databaseUrl");
    scratch = await scratchDatabase(opts.databaseUrl);
  }
  const opened = await openMigratedDb(
    scratch ? { databaseUrl: scratch.url } : { dataDir: "memory://" },
  );
  const devnet = await startDevnet({
    networks: ["eip155:8453"],
    blockTimeSeconds: 0,
    outFile: null,
  });
  try {
    const t0 = performance.now();
    await seedCatalog(opened, entries);
    say(
      `${opts.backend}: seeded ${entries} entries in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );

    const info = devnet.networks["eip155:8453"]!;
    const service = await createService({
      // The proof worker off: every seeded entry is due at once, and its
      // crawl (a migration's, once) is not the steady state being measured.
      overrides: { collectProcessMetrics: false, reconcile: false, catalogProofs: false },
      config: loadConfig({
        FACILITATOR_MODE: "devnet",
        HOST: "127.0.0.1",
        PORT: "0",
        LOG_LEVEL: "silent",
        // Discovery takes no key, so it counts against the client address: the
        // limit stays on (its cost is in the figures) and is set above what one
        // load generator can send, so no request is refused.
        RATE_LIMIT_MAX: "10000000",
      }),
      database: opened,
      chains: {
        eip155: {
          networks: [{ id: "eip155:8453", rpcUrls: [info.rpcUrl] }],
          privateKeys: info.facilitatorPrivateKeys as Hex[],
        },
      },
    });
    const base = await service.listen();
    try {
      const scenarios: [string, (i: number) => string][] = [
        [
          "GET /discovery/resources · popular pages",
          (i) => `/discovery/resources?limit=20&offset=${(i % 8) * 20}${filters(i % 5)}`,
        ],
        [
          "GET /discovery/resources · distinct pages",
          // Any offset, not just page starts: tens of thousands of distinct pages.
          (i) => `/discovery/resources?limit=20&offset=${(i * 7919) % entries}${filters(i)}`,
        ],
        [
          "GET /discovery/search · popular queries",
          (i) => {
            const k = i % 40;
            return `/discovery/search?query=${encodeURIComponent(words(k, prng(k)))}${filters(k)}`;
          },
        ],
        [
          "GET /discovery/search · distinct queries",
          (i) =>
            `/discovery/search?query=${encodeURIComponent(words(i, prng(1_000_003 + i)))}${filters(i)}`,
        ],
      ];
      const rows: CatalogBenchRow[] = [];
      let offset = 0;
      for (const [name, path] of scenarios) {
        // Each scenario continues the sequence, so "distinct" stays distinct.
        const shifted = (base0: number) => (i: number) => path(base0 + i);
        const warm = await load(base, shifted(offset), concurrency, warmupMs);
        offset += warm.latencies.length + concurrency;
        const run = await load(base, shifted(offset), concurrency, durationMs);
        offset += run.latencies.length + concurrency;
        if (run.failures > 0) throw new Error(`${name}: ${run.failures} non-200 answers`);
        const row = {
          name,
          p50Ms: percentile(run.latencies, 50),
          p99Ms: percentile(run.latencies, 99),
          rps: run.latencies.length / run.seconds,
        };
        rows.push(row);
        say(
          `${opts.backend}: ${name}: p50 ${row.p50Ms.toFixed(1)} ms, p99 ${row.p99Ms.toFixed(1)} ms, ${row.rps.toFixed(0)} req/s`,
        );
      }
      return { rows };
    } finally {
      await service.close();
    }
  } finally {
    await opened.close();
    await devnet.stop();
    await scratch?.drop();
  }
}
