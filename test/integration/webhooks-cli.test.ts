/**
 * `npm run keys -- webhooks …`: set prints a Standard Webhooks secret once,
 * show masks it, log lists attempts, remove drops the endpoint, and the SSRF
 * guard refuses private targets unless allowed.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

test("keys CLI: webhooks set, show, log, remove", async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "webhooks-cli-"));
  const base = { ...process.env, DATA_DIR: dataDir, LOG_LEVEL: "silent" };
  delete (base as Record<string, string | undefined>)["DATABASE_URL"];
  const cli = (env: Record<string, string>, ...args: string[]) =>
    run(process.execPath, ["--import", "tsx", "src/cli/keys.ts", ...args], {
      env: { ...base, ...env },
    });
  const keys = (...args: string[]) => cli({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "false" }, ...args);

  await keys("accounts", "create", "--name", "acme");

  for (const url of ["http://10.0.0.1/hook", "http://127.0.0.1:9/hook", "http://[::1]/"]) {
    await assert.rejects(
      keys("webhooks", "set", "acme", "--url", url),
      (e: { stderr: string; code: number }) => {
        assert.equal(e.code, 2);
        assert.match(e.stderr, /WEBHOOK_ALLOW_PRIVATE_TARGETS/);
        return true;
      },
    );
  }

  const set = await cli(
    { WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" },
    "webhooks",
    "set",
    "acme",
    "--url",
    "http://127.0.0.1:9/hook",
  );
  const secret = /(whsec_[A-Za-z0-9+/=]+)/.exec(set.stdout)?.[1];
  assert.ok(secret, set.stdout);
  assert.equal(set.stdout.split(secret).length - 1, 1, "printed exactly once");

  const shown = await keys("webhooks", "show", "acme");
  assert.match(shown.stdout, /http:\/\/127\.0\.0\.1:9\/hook/);
  assert.ok(!shown.stdout.includes(secret), "show never prints the full secret");

  const log = await keys("webhooks", "log", "acme");
  assert.match(log.stdout, /no delivery attempts yet/);

  await keys("webhooks", "remove", "acme");
  assert.match((await keys("webhooks", "show", "acme")).stdout, /no webhook endpoint/);
  await assert.rejects(keys("webhooks", "set", "acme"), /--url/);
});
