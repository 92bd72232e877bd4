/**
 * `npm run keys`: create prints the full key once, list shows only masked
 * prefixes, delete revokes. Runs the real command against a real data dir.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { openMigratedDb } from "../../src/storage/db.js";
import { ApiKeyAuthenticator } from "../../src/features/keys/authenticator.js";

const run = promisify(execFile);

test("keys CLI: create, list, delete", async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "keys-cli-"));
  const env = { ...process.env, DATA_DIR: dataDir, DATABASE_URL: "", LOG_LEVEL: "silent" };
  delete (env as Record<string, string | undefined>)["DATABASE_URL"];
  const keys = (...args: string[]) =>
    run(process.execPath, ["--import", "tsx", "src/cli/keys.ts", ...args], { env });

  const created = await keys("create", "--name", "staging");
  const key = /(x402_sk_[A-Za-z0-9_-]{43})/.exec(created.stdout)?.[1];
  assert.ok(key, `full key printed: ${created.stdout}`);
  assert.equal(created.stdout.split(key).length - 1, 1, "printed exactly once");
  const id = /id ([0-9a-f-]{36})/.exec(created.stdout)?.[1];
  assert.ok(id);

  await keys("create", "--name", "production");
  const listed = await keys("list");
  assert.match(listed.stdout, /staging/);
  assert.match(listed.stdout, /production/);
  assert.ok(listed.stdout.includes(key.slice(0, 12) + "…"));
  assert.ok(!listed.stdout.includes(key), "list never shows the full key");

  const db = await openMigratedDb({ dataDir: join(dataDir, "pglite") });
  assert.ok(
    await new ApiKeyAuthenticator(db.db).authenticate(key),
    "the printed key authenticates",
  );
  await db.close();

  await keys("delete", id);
  const afterDelete = await keys("list");
  assert.doesNotMatch(afterDelete.stdout, /staging/);

  const db2 = await openMigratedDb({ dataDir: join(dataDir, "pglite") });
  assert.equal(await new ApiKeyAuthenticator(db2.db).authenticate(key), null);
  await db2.close();

  await assert.rejects(keys("create"), (e: { stderr: string; code: number }) => {
    assert.equal(e.code, 2);
    assert.match(e.stderr, /--name/);
    return true;
  });
});
