/**
 * A second start, as a person makes it by running `npm start` twice, or
 * with another program on the port: one line says what is in the way and
 * how to get around it, the process exits 1 at once, and nothing of it is
 * left running or written. The first devnet keeps serving, its devnet file
 * untouched (a start that found out late used to rewrite it).
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, signalAndWait, until } from "../support/processes.js";

let root: string;
let first: ChildProcess | undefined;
let firstStderr = "";
let port: number;

function env(dir: string, servicePort: number): Record<string, string | undefined> {
  const e: Record<string, string | undefined> = {
    ...process.env,
    FACILITATOR_MODE: "devnet",
    DEVNET_NETWORKS: "eip155:8453",
    DATA_DIR: join(dir, ".data"),
    DEVNET_FILE: join(dir, ".devnet", "devnet.json"),
    HOST: "127.0.0.1",
    PORT: String(servicePort),
  };
  delete e["DATABASE_URL"];
  delete e["LOG_LEVEL"];
  return e;
}

/** Runs a start to its exit: its code and its stderr. */
async function refusedStart(
  dir: string,
  servicePort: number,
): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    env: env(dir, servicePort),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stdout!.on("data", (c: Buffer) => (stderr += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
  const code = await new Promise<number | null>((r) => child.once("exit", (c) => r(c)));
  return { code, stderr };
}

before(async () => {
  root = mkdtempSync(join(tmpdir(), "start-refusals-"));
  port = await freePort();
  first = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    env: env(join(root, "first"), port),
    stdio: ["ignore", "ignore", "pipe"],
  });
  first.stderr!.on("data", (c: Buffer) => (firstStderr += c.toString()));
  await until(
    "the first devnet to announce its key",
    async () =>
      (
        JSON.parse(readFileSync(join(root, "first", ".devnet", "devnet.json"), "utf8")) as {
          apiKey?: string;
        }
      ).apiKey,
    120_000,
  );
});

after(async () => {
  if (first) await signalAndWait(first, "SIGTERM");
  rmSync(root, { recursive: true, force: true });
});

test("npm start twice: the second names the first's process and how to run beside it, exits 1 at once, touches nothing", async () => {
  const file = join(root, "first", ".devnet", "devnet.json");
  const before = readFileSync(file, "utf8");
  const second = await refusedStart(join(root, "first"), port);
  assert.equal(second.code, 1, second.stderr);
  const lines = second.stderr.trim().split("\n");
  assert.equal(lines.length, 1, second.stderr);
  assert.match(
    lines[0]!,
    new RegExp(
      `^cannot start: another facilitator \\(process ${first!.pid}\\) is using the data directory .*\\.data; stop it, or run this one beside it: DATA_DIR=\\S+ DEVNET_FILE=\\S+ PORT=\\d+ npm start$`,
    ),
  );
  assert.equal(readFileSync(file, "utf8"), before, "the first's devnet file is untouched");
  assert.equal((await fetch(`http://127.0.0.1:${port}/supported`)).status, 200);
});

test("the port taken: one line names it and PORT, exits 1 at once, and starts no chain", async () => {
  const dir = join(root, "other");
  const refused = await refusedStart(dir, port);
  assert.equal(refused.code, 1, refused.stderr);
  const lines = refused.stderr.trim().split("\n");
  assert.equal(lines.length, 1, refused.stderr);
  assert.match(
    lines[0]!,
    new RegExp(
      `^cannot start: port ${port} on 127\\.0\\.0\\.1 is in use \\(another facilitator, or another program\\); stop it, or choose another port: PORT=\\d+ npm start$`,
    ),
  );
  // Nothing started: no chain state, no devnet file, and the lock let go.
  assert.equal(existsSync(join(dir, ".data", "devnet-chains")), false);
  assert.equal(existsSync(join(dir, ".devnet", "devnet.json")), false);
  assert.equal(existsSync(join(dir, ".data", "facilitator.pid")), false);
});

test("the first, stopped, lets go of its data directory", async () => {
  assert.equal(await signalAndWait(first!, "SIGTERM"), 0, firstStderr);
  first = undefined;
  assert.equal(existsSync(join(root, "first", ".data", "facilitator.pid")), false);
});
