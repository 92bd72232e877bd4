/**
 * `npm start` is the production path: it runs the compiled service, building
 * dist/ first when it is missing or older than a source. Played on a copy of
 * the project (its own dist/, node_modules shared by a link):
 * - the first start compiles, then serves the devnet;
 * - SIGTERM stops it with exit 0;
 * - a changed source makes the build stale;
 * - a start with the TypeScript sources gone still serves, from dist/ alone,
 *   without compiling again: proof that nothing runs through a loader.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  rmSync,
  symlinkSync,
  utimesSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { freePort, until } from "../support/processes.js";

const ROOT = resolve(import.meta.dirname, "../..");
let copy: string;

before(() => {
  copy = mkdtempSync(join(tmpdir(), "npm-start-"));
  for (const part of ["src", "devnet", "bench/reference", "scripts"]) {
    cpSync(join(ROOT, part), join(copy, part), { recursive: true });
  }
  for (const file of ["package.json", "tsconfig.json", "tsconfig.build.json"]) {
    cpSync(join(ROOT, file), join(copy, file));
  }
  symlinkSync(join(ROOT, "node_modules"), join(copy, "node_modules"), "dir");
});
after(() => rmSync(copy, { recursive: true, force: true }));

async function start(): Promise<{ child: ChildProcess; url: string; stderr: () => string }> {
  const port = await freePort();
  const env: Record<string, string | undefined> = {
    ...process.env,
    FACILITATOR_MODE: "devnet",
    DEVNET_NETWORKS: "eip155:8453",
    DATA_DIR: join(copy, ".data"),
    DEVNET_FILE: join(copy, ".devnet", "devnet.json"),
    HOST: "127.0.0.1",
    PORT: String(port),
    LOG_LEVEL: "warn",
  };
  delete env["DATABASE_URL"];
  delete env["NODE_OPTIONS"];
  let stderr = "";
  const child = spawn(process.execPath, ["scripts/start.mjs"], {
    cwd: copy,
    env,
    stdio: ["ignore", "ignore", "pipe"],
  });
  child.stderr!.setEncoding("utf8");
  child.stderr!.on("data", (c: string) => (stderr += c));
  const url = `http://127.0.0.1:${port}`;
  const exited = new Promise<never>((_, reject) =>
    child.once("exit", (code) => reject(new Error(`start exited ${code}: ${stderr}`))),
  );
  // A compile on a busy machine can take a minute or two.
  await Promise.race([
    until(
      "the service to answer /supported",
      async () => (await fetch(`${url}/supported`)).ok,
      300_000,
    ),
    exited,
  ]);
  exited.catch(() => undefined);
  return { child, url, stderr: () => stderr };
}

async function stop(child: ChildProcess): Promise<number | null> {
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  child.kill("SIGTERM");
  return exited;
}

// One test, in order: each step needs the build the step before it made.
test("npm start: compiles once, serves from dist/, stops on SIGTERM", async () => {
  // The first start compiles dist/ and serves; SIGTERM exits 0.
  assert.equal(existsSync(join(copy, "dist")), false);
  {
    const { child, url, stderr } = await start();
    try {
      assert.match(stderr(), /build: compiled in [\d.]+ s/);
      assert.ok(existsSync(join(copy, "dist", "src", "main.js")));
      const supported = (await (await fetch(`${url}/supported`)).json()) as {
        kinds: { network: string; scheme: string }[];
      };
      const schemes = supported.kinds
        .filter((k) => k.network === "eip155:8453")
        .map((k) => k.scheme);
      assert.deepEqual(schemes.sort(), ["batch-settlement", "exact", "upto"]);
    } finally {
      assert.equal(await stop(child), 0, stderr());
    }
  }
  // The devnet contracts were compiled once, into the project's cache, not
  // into dist/ (which every build recreates).
  const cached = readdirSync(join(copy, ".devnet", "artifacts")).filter((f) => f.endsWith(".json"));
  assert.equal(cached.length, 1, "one compiled set of devnet contracts at the project root");

  // A changed source makes the build stale; an untouched tree does not.
  const build = (await import(pathToFileURL(join(copy, "scripts", "build.mjs")).href)) as {
    isStale(): boolean;
  };
  assert.equal(build.isStale(), false);
  const source = join(copy, "src", "app.ts");
  const later = new Date(Date.now() + 60_000);
  utimesSync(source, later, later);
  assert.equal(build.isStale(), true);

  // The next start rebuilds dist/ and still finds the compiled contracts.
  {
    const { child, stderr } = await start();
    try {
      assert.match(stderr(), /build: compiled in [\d.]+ s/);
      assert.doesNotMatch(stderr(), /compiling devnet contracts/);
    } finally {
      assert.equal(await stop(child), 0, stderr());
    }
  }
  const earlier = new Date(Date.now() - 3_600_000);
  utimesSync(source, earlier, earlier);
  assert.equal(build.isStale(), false);

  // With the TypeScript sources gone, start runs dist/ as built, without compiling.
  renameSync(join(copy, "src"), join(copy, "src-away"));
  try {
    const { child, url, stderr } = await start();
    try {
      assert.doesNotMatch(stderr(), /compiling/);
      assert.equal((await fetch(`${url}/supported`)).status, 200);
    } finally {
      assert.equal(await stop(child), 0, stderr());
    }
  } finally {
    renameSync(join(copy, "src-away"), join(copy, "src"));
  }
});
