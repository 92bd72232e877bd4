/**
 * No file in src/ grows past LIMIT lines unnoticed: one that does is in
 * OVERSIZED below with a one-line reason (generated data, such as an ABI,
 * qualifies; "not split yet" is a reason only with what it waits for), or
 * this test fails naming it. The list keeps no stale lines either: a listed
 * file that shrank under the limit, or moved, or is gone, fails it too, so
 * the list is always the set of today's large files.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, sep } from "node:path";

const ROOT = join(import.meta.dirname, "..");
const LIMIT = 600;

/** Each src/ file allowed past LIMIT lines, by its path from the repository's root, with why. */
const OVERSIZED: Readonly<Record<string, string>> = {
  "src/chains/evm/confidential/vaultAbi.ts":
    "ABI data: the vault contract's, checked against the compiled contract by its test",
  "src/chains/evm/confidential/vault.ts":
    "createConfidentialVault is one closure over the contract and the FHE client (enablement, daily batch, withdrawals, reads); not split yet",
  "src/features/billing/billingLedger.ts":
    "billing's writes and the sweep that share its money rules, plus the history and CSV reads (~90 lines) that could leave; not split yet",
  "src/features/plans/quotaLedger.ts":
    "QuotaLedger's reserve and commit group commits, each with its own SQL, keep one invariant (used + reserved within the limit) together",
  "src/chains/starknet/exactScheme.ts":
    "the Starknet mechanism in one class: verify's chain checks, the simulation as sent (sized, signed, simulated) and settle's follow-up; the simulation (~150 lines) could leave for a file of its own",
};

/** Every file under `dir`, by its path from the repository's root (with `/`). */
function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return filesUnder(path);
    return [relative(ROOT, path).split(sep).join("/")];
  });
}

/** Lines as `wc -l` counts them, plus a last line without its newline. */
function linesOf(path: string): number {
  const text = readFileSync(join(ROOT, path), "utf8");
  const newlines = text.split("\n").length - 1;
  return text.endsWith("\n") || text === "" ? newlines : newlines + 1;
}

const sizes = new Map(filesUnder(join(ROOT, "src")).map((f) => [f, linesOf(f)]));

test(`every src/ file over ${LIMIT} lines is listed with its reason`, () => {
  const unlisted = [...sizes]
    .filter(([file, lines]) => lines > LIMIT && OVERSIZED[file] === undefined)
    .map(([file, lines]) => `${file} (${lines} lines)`);
  assert.deepEqual(
    unlisted,
    [],
    `over ${LIMIT} lines: split them, or add each to OVERSIZED in scripts/fileSizes.test.ts with a one-line reason`,
  );
});

test("every listed file is still over the limit, and its reason is one line", () => {
  for (const [file, reason] of Object.entries(OVERSIZED)) {
    const lines = sizes.get(file);
    assert.ok(lines !== undefined, `${file} is listed but gone (moved?): update OVERSIZED`);
    assert.ok(
      lines > LIMIT,
      `${file} is ${lines} lines, within ${LIMIT}: remove it from OVERSIZED`,
    );
    assert.match(reason, /^[^\n]{10,200}$/, `${file}: one line of reason`);
  }
});
