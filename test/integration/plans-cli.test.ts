/**
 * `npm run keys -- accounts plan|billing|suspend|resume`: the real command
 * against a real data dir; the change is in the account row at once, and a
 * plan set by hand is recorded as a comp in the account's billing history.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { openMigratedDb } from "../../src/storage/db.js";

const run = promisify(execFile);

test("keys CLI: accounts plan (a comp, recorded), billing, suspend and resume", async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "plans-cli-"));
  const env = { ...process.env, DATA_DIR: dataDir, LOG_LEVEL: "silent" };
  delete (env as Record<string, string | undefined>)["DATABASE_URL"];
  const keys = (...args: string[]) =>
    run(process.execPath, ["--import", "tsx", "src/cli/keys.ts", ...args], { env });
  const accountRow = async () => {
    const db = await openMigratedDb({ dataDir: join(dataDir, "pglite") });
    try {
      return await db.db
        .selectFrom("accounts")
        .select(["plan", "suspended_at", "paid_until"])
        .where("name", "=", "acme")
        .executeTakeFirstOrThrow();
    } finally {
      await db.close();
    }
  };

  await keys("accounts", "create", "--name", "acme");
  assert.equal((await accountRow()).plan, "free");

  const upgraded = await keys("accounts", "plan", "acme", "pro", "--note", "design partner");
  assert.match(upgraded.stdout, /pro plan/);
  assert.match(upgraded.stdout, /comp/);
  assert.equal((await accountRow()).plan, "pro");
  assert.equal((await accountRow()).paid_until, null, "no --days: no end date");

  const limited = await keys("accounts", "plan", "acme", "starter", "--days", "30");
  assert.match(limited.stdout, /then Free/);
  const row = await accountRow();
  assert.equal(row.plan, "starter");
  const days = (row.paid_until!.getTime() - Date.now()) / 86_400_000;
  assert.ok(days > 29.9 && days <= 30, `30 days (${days})`);
  const history = (await keys("accounts", "billing", "acme")).stdout;
  assert.match(history, /comp\s+pro\s+0\.00\s.*operator\s+paid\s+design partner/);
  assert.match(history, /comp\s+starter\s+0\.00\s/);

  await keys("accounts", "plan", "acme", "payg");
  await keys("accounts", "suspend", "acme");
  const suspended = await accountRow();
  assert.equal(suspended.plan, "payg");
  assert.ok(suspended.suspended_at);
  assert.match((await keys("accounts")).stdout, /payg \(suspended\)/);

  await keys("accounts", "resume", "acme");
  assert.equal((await accountRow()).suspended_at, null);

  await assert.rejects(
    keys("accounts", "plan", "acme", "gold"),
    (e: { code: number; stderr: string }) => {
      assert.equal(e.code, 2);
      assert.match(e.stderr, /free, starter, pro, max, payg/);
      return true;
    },
  );
  await assert.rejects(keys("accounts", "suspend", "nobody"), (e: { code: number }) => {
    assert.equal(e.code, 2);
    return true;
  });
});
