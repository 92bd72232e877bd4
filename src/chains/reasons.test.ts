/**
 * Every reason the service answers is documented: the protocol's reasons and
 * each family's catalogue (`src/chains/<family>/reasons.ts`, one per family
 * folder) against the README's "Payment reasons" table. Read from the files
 * themselves, so a reason added anywhere in a catalogue fails here until the
 * table names it.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { Reason } from "../protocol/reasons.js";

const CHAINS = fileURLToPath(new URL(".", import.meta.url));
const README = fileURLToPath(new URL("../../README.md", import.meta.url));

/** The family folders: each has the entry the family table imports. */
function familyFolders(): string[] {
  return readdirSync(CHAINS).filter(
    (d) => statSync(join(CHAINS, d)).isDirectory() && existsSync(join(CHAINS, d, "entry.ts")),
  );
}

/** Every string value of every object a catalogue module exports. */
function reasonsOf(module: Record<string, unknown>): string[] {
  return Object.values(module).flatMap((v) =>
    v !== null && typeof v === "object"
      ? Object.values(v).filter((r): r is string => typeof r === "string")
      : [],
  );
}

/** The reasons (code spans) in the README's "Payment reasons" table. */
function documentedReasons(): Set<string> {
  const text = readFileSync(README, "utf8");
  const start = text.indexOf("\n## Payment reasons\n");
  assert.ok(start >= 0, "README.md has a '## Payment reasons' section");
  const end = text.indexOf("\n## ", start + 1);
  const rows = text
    .slice(start, end < 0 ? undefined : end)
    .split("\n")
    .filter((l) => l.startsWith("|"));
  assert.ok(rows.length > 2, "the section holds a table");
  return new Set(rows.flatMap((r) => [...r.matchAll(/`([a-z0-9_]+)`/g)].map((m) => m[1]!)));
}

async function catalogues(): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>([["protocol", Object.values(Reason)]]);
  for (const folder of familyFolders()) {
    const module = (await import(`./${folder}/reasons.js`)) as Record<string, unknown>;
    out.set(folder, reasonsOf(module));
  }
  return out;
}

test("every family folder keeps its reasons in its own reasons.ts", () => {
  const folders = familyFolders();
  assert.ok(folders.length >= 5, `family folders found: ${folders.join(", ")}`);
  const missing = folders.filter((d) => !existsSync(join(CHAINS, d, "reasons.ts")));
  assert.deepEqual(missing, [], "a family without src/chains/<family>/reasons.ts");
});

test("every reason the service answers is in the README's table of payment reasons", async () => {
  const documented = documentedReasons();
  const undocumented: string[] = [];
  for (const [where, reasons] of await catalogues()) {
    for (const r of reasons) if (!documented.has(r)) undocumented.push(`${where}: ${r}`);
  }
  assert.deepEqual(undocumented, [], "add these to README.md, section 'Payment reasons'");
});

test("reasons are snake_case, and no two families answer the same one", async () => {
  const protocol = new Set<string>(Object.values(Reason));
  const owner = new Map<string, string>();
  for (const [where, reasons] of await catalogues()) {
    for (const r of reasons) {
      assert.match(r, /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/, `${where}: "${r}"`);
      // A family may answer a protocol reason; a family's own belongs to it alone.
      if (where === "protocol" || protocol.has(r)) continue;
      const first = owner.get(r);
      assert.ok(first === undefined || first === where, `"${r}" is in ${first} and ${where}`);
      owner.set(r, where);
    }
  }
});
