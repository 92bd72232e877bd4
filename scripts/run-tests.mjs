#!/usr/bin/env node
// Runs the *.test.ts files with node's built-in test runner (through tsx),
// prints the spec report, and ends with the plain line "N passed, N failed"
// that CI reads (scripts/summary-reporter.mjs).
//
//   node scripts/run-tests.mjs --unit          the unit lane (`npm run test:unit`): every
//                                              src/**/*.test.ts but *.integration.test.ts,
//                                              and the repository's own checks in
//                                              scripts/*.test.ts, several files at once
//                                              (one per core, at least 2); no database and
//                                              no chain (a file that imports devnet/ or
//                                              opens a database is refused: unitLane.mjs)
//   node scripts/run-tests.mjs --integration   the integration lane (`npm run test:integration`):
//                                              everything under test/, devnet/ and bench/,
//                                              and src/**/*.integration.test.ts (the tests
//                                              beside the code that start a database or a
//                                              chain), one file at a time
//   node scripts/run-tests.mjs --all           the unit lane, then the integration lane
//                                              (`npm test`): each lane's count on a labelled
//                                              line, and last the two lanes' total; both
//                                              lanes run even when the first fails
//   node scripts/run-tests.mjs [path-filter ...]
//                                              the files under src/, scripts/, devnet/, bench/
//                                              and test/
//                                              whose path contains a filter, one at a time
//
// A lane takes path filters too (`npm run test:integration -- test/e2e/`).
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join, sep } from "node:path";
import { parseSummary, summaryLine } from "./summary-reporter.mjs";
import { ioIn } from "./unitLane.mjs";

/** A test beside the code that starts a database or a chain says so in its name. */
const INTEGRATION_BESIDE_CODE = ".integration.test.ts";

const LANES = {
  unit: {
    roots: ["src", "scripts"],
    keep: (f) => !f.endsWith(INTEGRATION_BESIDE_CODE),
    // Unit files do no I/O (checked below), so they run side by side, one
    // per core, and the lane stays fast on a busy 2-core machine.
    concurrency: Math.max(2, availableParallelism()),
  },
  integration: {
    roots: ["test", "devnet", "bench", "src"],
    keep: (f) => !f.startsWith(`src${sep}`) || f.endsWith(INTEGRATION_BESIDE_CODE),
    // Integration tests start chains and servers: one file at a time keeps a
    // 2-core machine responsive and the output readable.
    concurrency: 1,
  },
};

const args = process.argv.slice(2);
const mode = ["unit", "integration", "all"].find((m) => args.includes(`--${m}`));
const filters = args.filter((a) => !a.startsWith("--"));
const unknown = args.filter((a) => a.startsWith("--") && a !== `--${mode}`);
if (unknown.length > 0) {
  console.error(`unknown option ${unknown.join(" ")} (--unit, --integration or --all)`);
  process.exit(2);
}

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

function filesUnder(roots, keep = () => true) {
  return roots
    .flatMap(find)
    .filter(keep)
    .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
    .sort();
}

/** Exits when a unit-lane file starts a database or a chain, naming the files. */
function refuseIoInUnitLane(files) {
  const offenders = files.flatMap((f) => {
    const why = ioIn(readFileSync(f, "utf8"));
    return why ? [`${f} (${why})`] : [];
  });
  if (offenders.length === 0) return;
  console.error(
    `the unit lane does no I/O, but these start a database or a chain:\n  ${offenders.join("\n  ")}\n` +
      `name them *${INTEGRATION_BESIDE_CODE} (the integration lane runs them)`,
  );
  process.exit(1);
}

/**
 * Runs `files` in one `node --test`; the spec report goes to stdout, the
 * summary line to `summaryFile` when given (else to stdout as well).
 * Resolves with the exit code.
 */
function runFiles(files, concurrency, summaryFile) {
  const nodeArgs = [
    "--import",
    "tsx",
    "--test",
    `--test-concurrency=${concurrency}`,
    "--test-reporter=spec",
    "--test-reporter-destination=stdout",
    "--test-reporter=./scripts/summary-reporter.mjs",
    `--test-reporter-destination=${summaryFile ?? "stdout"}`,
    ...files,
  ];
  const child = spawn(process.execPath, nodeArgs, {
    stdio: "inherit",
    env: { ...process.env, NODE_ENV: "test" },
  });
  return new Promise((resolve) => {
    child.on("exit", (code, signal) => resolve(signal ? 1 : (code ?? 1)));
  });
}

if (mode === "all") {
  const dir = mkdtempSync(join(tmpdir(), "run-tests-"));
  const total = { passed: 0, failed: 0, skipped: 0 };
  let failedLanes = 0;
  let ran = 0;
  for (const [name, lane] of Object.entries(LANES)) {
    const files = filesUnder(lane.roots, lane.keep);
    if (name === "unit") refuseIoInUnitLane(files);
    if (files.length === 0) {
      console.log(`\n${name} lane: no test files matched`);
      continue;
    }
    ran++;
    console.log(
      `\n${name} lane: ${files.length} file${files.length === 1 ? "" : "s"}, ${lane.concurrency} at a time\n`,
    );
    const summaryFile = join(dir, `${name}.txt`);
    const code = await runFiles(files, lane.concurrency, summaryFile);
    let counts;
    try {
      counts = parseSummary(readFileSync(summaryFile, "utf8"));
    } catch {
      counts = undefined;
    }
    if (counts) {
      for (const k of Object.keys(total)) total[k] += counts[k];
      console.log(`\n${name} lane: ${summaryLine(counts)}`);
    } else {
      console.log(`\n${name} lane: no summary (the test runner exited with ${code})`);
    }
    if (code !== 0 || !counts) failedLanes++;
  }
  rmSync(dir, { recursive: true, force: true });
  if (ran === 0) {
    console.error("no test files matched");
    process.exit(1);
  }
  // The last line, for CI: both lanes together.
  console.log(`\n${summaryLine(total)}`);
  process.exit(failedLanes > 0 || total.failed > 0 ? 1 : 0);
}

const files = mode
  ? filesUnder(LANES[mode].roots, LANES[mode].keep)
  : filesUnder(["src", "scripts", "devnet", "bench", "test"]);
if (mode === "unit") refuseIoInUnitLane(files);
if (files.length === 0) {
  console.error("no test files matched");
  process.exit(1);
}
process.exit(await runFiles(files, mode ? LANES[mode].concurrency : 1));
