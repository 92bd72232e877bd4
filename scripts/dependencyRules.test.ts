/**
 * The import rules (`.dependency-cruiser.cjs`, run by `npm run arrows`)
 * checked where depcruise cannot check them: each rule says why it exists
 * and has its row in docs/architecture.md, and the rule that keeps chain
 * SDKs out of features names every family's SDK. A family's SDK is read
 * from its folder, not written down: every package a family's code imports
 * but the family-neutral ones below. A new family whose SDK the rule does
 * not name would otherwise leave the rule blind to it.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { NAMESPACES } from "../src/chains/index.js";

const ROOT = join(import.meta.dirname, "..");
const CHAINS = join(ROOT, "src", "chains");

interface Rule {
  name: string;
  comment?: string;
  to: { path?: string };
}
const { forbidden } = createRequire(import.meta.url)(join(ROOT, ".dependency-cruiser.cjs")) as {
  forbidden: Rule[];
};

/**
 * Packages a family uses that are not its chain's: the x402 protocol itself
 * and the service's own libraries, which features use too.
 */
const FAMILY_NEUTRAL = new Set([
  "@x402/core",
  "@x402/extensions",
  "zod",
  "undici",
  "pino",
  "bignumber.js",
]);

/** The package an import names (`@scope/name` or `name`), or undefined for a file or a node: builtin. */
function packageOf(specifier: string): string | undefined {
  if (specifier.startsWith(".") || specifier.startsWith("node:")) return undefined;
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
}

/** The non-test .ts files under `dir`. */
function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return name.endsWith(".ts") && !name.endsWith(".test.ts") ? [path] : [];
  });
}

/** Every package the files under `dir` import, statically or dynamically. */
function packagesImportedUnder(dir: string): Set<string> {
  const found = new Set<string>();
  for (const file of sources(dir)) {
    const text = readFileSync(file, "utf8");
    const imports = /(?:\sfrom\s+|\bimport\(\s*|^import\s+)["']([^"'\s]+)["']/gm;
    for (const m of text.matchAll(imports)) {
      const name = packageOf(m[1]!);
      if (name) found.add(name);
    }
  }
  return found;
}

/** The family folders: src/chains/<folder>/ with an entry.ts (the family table's line). */
const familyFolders = readdirSync(CHAINS).filter((name) =>
  existsSync(join(CHAINS, name, "entry.ts")),
);

test("every rule says why it exists, and has its row in docs/architecture.md", () => {
  const docs = readFileSync(join(ROOT, "docs", "architecture.md"), "utf8");
  for (const rule of forbidden) {
    assert.ok((rule.comment ?? "").trim().length > 0, `${rule.name}: give it a comment`);
    assert.ok(docs.includes(`\`${rule.name}\``), `${rule.name}: a row in docs/architecture.md`);
  }
});

test("every family has a folder the SDK check below reads", () => {
  assert.equal(familyFolders.length, NAMESPACES.length, familyFolders.join(", "));
});

test("features-no-chain-sdk names every package a family imports but the family-neutral ones", () => {
  const rule = forbidden.find((r) => r.name === "features-no-chain-sdk");
  assert.ok(rule?.to.path, "the rule exists and names packages by path");
  const named = new RegExp(rule.to.path);
  const missing = familyFolders.flatMap((folder) =>
    [...packagesImportedUnder(join(CHAINS, folder))]
      .filter((pkg) => !FAMILY_NEUTRAL.has(pkg) && !named.test(`node_modules/${pkg}/index.js`))
      .map((pkg) => `${pkg} (src/chains/${folder}/)`),
  );
  assert.deepEqual(
    missing,
    [],
    "add them to features-no-chain-sdk in .dependency-cruiser.cjs (or, if every layer may use one, to FAMILY_NEUTRAL here)",
  );
});
