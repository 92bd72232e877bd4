/**
 * Where the compiled contracts are cached: one place for the sources run
 * through the TypeScript loader and for the compiled service, so a build
 * (which recreates dist/) never throws the cache away.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { CACHE_DIR, projectRootFrom } from "./compile.js";

test("devnet/evm/ and the compiled dist/devnet/evm/ find the same project root", () => {
  const root = mkdtempSync(join(tmpdir(), "devnet-root-"));
  try {
    writeFileSync(join(root, "package.json"), "{}");
    mkdirSync(join(root, "devnet", "evm"), { recursive: true });
    mkdirSync(join(root, "dist", "devnet", "evm"), { recursive: true });
    assert.equal(projectRootFrom(join(root, "devnet", "evm")), root);
    assert.equal(projectRootFrom(join(root, "dist", "devnet", "evm")), root);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("the artifact cache is the project's .devnet/artifacts, outside dist/", () => {
  const repo = dirname(dirname(dirname(fileURLToPath(import.meta.url))));
  assert.equal(CACHE_DIR, join(repo, ".devnet", "artifacts"));
});
