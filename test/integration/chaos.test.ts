/**
 * The chaos run, short: `npm run chaos` for two minutes with a fixed seed
 * (two service processes on the run's own PostgreSQL and Redis, the
 * devnet's chains behind failing proxies, replicas killed, stores
 * restarted, a reorg). It must end with every money invariant held, each
 * checked from the chains and the database: the run exits 0, and its report
 * says `ok` for every invariant and no `FAIL`.
 *
 * CHAOS_SEED picks another scenario. The longer run's report is in
 * docs/reliability.md.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** The invariants the report must name, each with `ok`. */
const INVARIANTS = [
  "every success:true is exactly one transfer",
  "no payment got two success:true answers",
  "every transaction our signers sent is journaled",
  "no settlement pending past the reconciler's horizon",
  "no answer was a 5xx other than 503 with Retry-After",
  "quota usage equals the successes charged",
  "exactly one settlement.succeeded event per success",
  "each payTo's balance equals the sum of the successes",
  "each process's RSS at the end",
];

test("a two-minute chaos run with a fixed seed holds every money invariant", async (t) => {
  const out = mkdtempSync(join(tmpdir(), "x402-chaos-test-"));
  try {
    const { code, output } = await new Promise<{ code: number | null; output: string }>(
      (resolve) => {
        const child = spawn(process.execPath, ["--import", "tsx", "chaos/run.ts"], {
          env: {
            ...process.env,
            CHAOS_SEED: process.env["CHAOS_SEED"] ?? "402",
            CHAOS_MINUTES: "2",
            CHAOS_OUT: out,
          },
          stdio: ["ignore", "pipe", "inherit"],
        });
        let text = "";
        child.stdout.on("data", (d: Buffer) => {
          text += d.toString();
          process.stdout.write(d);
        });
        child.on("exit", (c) => resolve({ code: c, output: text }));
      },
    );
    // On a laptop without the servers the run says what is missing and
    // exits 2; in CI a missing server fails the run.
    if (code === 2 && output.includes("is not installed") && !process.env["CI"]) {
      t.skip(output.trim());
      return;
    }
    const report = output.slice(output.indexOf("chaos report"));
    assert.ok(report.startsWith("chaos report"), `no report in:\n${output.slice(-3000)}`);
    for (const invariant of INVARIANTS) {
      const line = report.split("\n").find((l) => l.includes(invariant));
      assert.ok(line, `the report names "${invariant}"`);
      assert.match(line, /^\s+ok\s/, line);
    }
    assert.doesNotMatch(report, /FAIL/);
    assert.equal(code, 0, report);
    // Kept on failure: the history and the service logs are the evidence.
    rmSync(out, { recursive: true, force: true });
  } finally {
    if (existsSync(out)) console.log(`chaos history and logs kept in ${out}`);
  }
});
