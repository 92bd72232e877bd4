/**
 * The README's three tables that list every chain family, checked against
 * the family table (src/chains/index.ts) and the examples' network map, so
 * a new family without its rows fails here instead of going unnoticed: the
 * examples' table (each family's `--network` name for examples/pay.ts),
 * "What each network settles" (a row naming a network of each namespace),
 * and the documents' map (each family's page in docs/chains/). The fourth,
 * the payment reasons, is checked by src/chains/reasons.test.ts.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { NAMESPACES } from "../src/chains/index.js";
import { FAMILIES, nameOf } from "../examples/devnet.js";

const ROOT = join(import.meta.dirname, "..");
const README = readFileSync(join(ROOT, "README.md"), "utf8");

/** The rows of the first table after the heading `title` (the header and separator rows left out). */
function tableAfter(title: string): string[] {
  const start = README.indexOf(`\n## ${title}\n`);
  assert.ok(start >= 0, `README has a "## ${title}" section`);
  const next = README.indexOf("\n## ", start + 1);
  const section = README.slice(start, next < 0 ? undefined : next);
  const rows = section.split("\n").filter((line) => line.startsWith("|"));
  assert.ok(rows.length > 2, `a table under "## ${title}"`);
  return rows.slice(2);
}

test("the examples' table gives every family's --network name", () => {
  const rows = tableAfter("A paid API in a dozen lines");
  for (const family of FAMILIES) {
    const flag = `\`--network ${nameOf(family)}\``;
    assert.ok(
      rows.some((row) => row.includes(flag)),
      `a row with ${flag} for ${family}`,
    );
  }
});

test("the networks table has a row for every family's namespace", () => {
  const rows = tableAfter("What each network settles");
  for (const ns of NAMESPACES) {
    assert.ok(
      rows.some((row) => row.includes(`\`${ns}:`)),
      `a row naming a ${ns}: network`,
    );
  }
});

test("the documents' map links every family's page, one page per family", () => {
  const pages = readdirSync(join(ROOT, "docs", "chains")).filter((f) => f.endsWith(".md"));
  assert.equal(pages.length, NAMESPACES.length, pages.join(", "));
  const rows = tableAfter("Where to read more");
  for (const page of pages) {
    assert.ok(
      rows.some((row) => row.includes(`(docs/chains/${page})`)),
      `a link to docs/chains/${page}`,
    );
  }
});
