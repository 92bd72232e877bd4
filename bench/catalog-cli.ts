/**
 * `npm run bench:catalog`: the discovery catalog benchmark on PGlite, and on
 * PostgreSQL when DATABASE_URL or TEST_DATABASE_URL points at a server (a
 * scratch database is created there and dropped after). Prints a markdown
 * table and writes it to bench/results/catalog.md.
 *
 *   npm run bench:catalog
 *   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:54330/postgres npm run bench:catalog
 *   BENCH_QUICK=1 npm run bench:catalog     # 3 s per scenario instead of 10 s
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { runCatalogBench, type CatalogBenchRow } from "./catalog.js";

const quick = process.env["BENCH_QUICK"] === "1";
const serverUrl = process.env["DATABASE_URL"] || process.env["TEST_DATABASE_URL"];
const say = (line: string) => process.stderr.write(`${line}\n`);
const durationMs = quick ? 3_000 : 10_000;

const results: { backend: string; rows: CatalogBenchRow[] }[] = [];
results.push({
  backend: "PGlite",
  rows: (await runCatalogBench({ backend: "pglite", durationMs, progress: say })).rows,
});
if (serverUrl) {
  const { rows } = await runCatalogBench({
    backend: "postgres",
    databaseUrl: serverUrl,
    durationMs,
    progress: say,
  });
  results.push({ backend: "PostgreSQL", rows });
}

const lines = [
  "# Discovery catalog benchmark",
  "",
  `${new Date().toISOString()} · ${cpus().length} cores (${cpus()[0]?.model ?? "?"}) · Node ${process.version}`,
  `10,000 varied entries seeded through the catalog repository; the whole service in-process;`,
  `closed loop at concurrency 32 over HTTP keep-alive, ${durationMs / 1000} s per row after a 2 s warm-up.`,
  `"popular" cycles through 40 pages or queries (mostly served by the read cache, refreshed in the background);`,
  `"distinct" makes every request a new page or query (each one reaches the database).`,
  `The load generator shares the process with the service.`,
  serverUrl ? "" : "PostgreSQL not measured: set TEST_DATABASE_URL or DATABASE_URL.",
  "",
  "| Backend | Request | p50 (ms) | p99 (ms) | req/s |",
  "| --- | --- | ---: | ---: | ---: |",
  ...results.flatMap(({ backend, rows }) =>
    rows.map(
      (r) =>
        `| ${backend} | ${r.name} | ${r.p50Ms.toFixed(1)} | ${r.p99Ms.toFixed(1)} | ${r.rps.toFixed(0)} |`,
    ),
  ),
  "",
];
const report = lines.join("\n");
mkdirSync("bench/results", { recursive: true });
writeFileSync("bench/results/catalog.md", report);
process.stdout.write(`\n${report}`);
