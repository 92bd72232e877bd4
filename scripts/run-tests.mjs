#!/usr/bin/env node
// Runs every *.test.ts under src/, devnet/, bench/ and test/ with node's built-in test
// runner (through tsx), prints the spec report, and ends with the plain line
// "N passed, N failed" that CI reads.
//
//   node scripts/run-tests.mjs [path-filter ...]
import { spawn } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";

const ROOTS = ["src", "devnet", "bench", "test"];
const filters = process.argv.slice(2);

function find(dir) {
  let out = [];
  let entries = [];
  try {
    entries = readdirSync(dir);
  } catch {
    return out;
  }
  for (const e of entries) {
    if (e === "node_modules" || e.startsWith(".")) continue;
    const p = join(dir, e);
    if (statSync(p).isDirectory()) out = out.concat(find(p));
    else if (p.endsWith(".test.ts")) out.push(p);
  }
  return out;
}

const files = ROOTS.flatMap(find)
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .sort();
if (files.length === 0) {
  console.error("no test files matched");
  process.exit(1);
}

const args = [
  "--import",
  "tsx",
  "--test",
  // Integration tests start chains and servers: one file at a time keeps a
  // 2-core machine responsive and the output readable.
  "--test-concurrency=1",
  "--test-reporter=spec",
  "--test-reporter-destination=stdout",
  "--test-reporter=./scripts/summary-reporter.mjs",
  "--test-reporter-destination=stdout",
  ...files,
];
const child = spawn(process.execPath, args, {
  stdio: "inherit",
  env: { ...process.env, NODE_ENV: "test" },
});
child.on("exit", (code, signal) => process.exit(signal ? 1 : (code ?? 1)));
