/**
 * `npm run devnet` (devnet/cli.ts) as a person runs it: the documented
 * `DEVNET_NETWORKS=eip155:8453,near:mainnet` starts the base chain and
 * NEAR's ledger, both in the devnet file and both answering, and stops on
 * SIGTERM with status 0; a network no family's devnet runs is refused with
 * status 2 before anything starts, naming every network it could run.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

interface Cli {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
}

function runCli(env: Record<string, string>): Cli {
  const child = spawn(process.execPath, ["--import", "tsx", "devnet/cli.ts"], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (c: Buffer) => (output += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (output += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  return { child, output: () => output, exited };
}

async function waitFor(cli: Cli, pattern: RegExp, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!pattern.test(cli.output())) {
    if (cli.child.exitCode !== null) throw new Error(`devnet exited:\n${cli.output()}`);
    if (Date.now() > deadline) throw new Error(`no ${String(pattern)} in:\n${cli.output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const rpc = async (url: string, method: string, params: unknown) => {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  return (await res.json()) as { result?: Record<string, unknown> };
};

describe("npm run devnet with the documented DEVNET_NETWORKS=eip155:8453,near:mainnet", () => {
  let dir: string;
  let cli: Cli;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "devnet-cli-"));
    cli = runCli({
      DEVNET_NETWORKS: "eip155:8453,near:mainnet",
      DEVNET_FILE: join(dir, "devnet.json"),
    });
    await waitFor(cli, /Ctrl-C to stop[\s\S]*near:mainnet/, 180_000);
  });
  after(async () => {
    if (cli.child.exitCode === null) cli.child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });

  test("serves both: each in the summary and the devnet file, each answering its RPC", async () => {
    const file = JSON.parse(readFileSync(join(dir, "devnet.json"), "utf8")) as {
      networks: Record<string, { rpcUrl: string }>;
    };
    assert.deepEqual(Object.keys(file.networks).sort(), ["eip155:8453", "near:mainnet"]);
    assert.match(cli.output(), /^ {2}eip155:8453 +http:\/\/127\.0\.0\.1:\d+/m);
    assert.match(cli.output(), /^ {2}near:mainnet +http:\/\/127\.0\.0\.1:\d+ +USDC /m);
    const base = await rpc(file.networks["eip155:8453"]!.rpcUrl, "eth_chainId", []);
    assert.equal(base.result, "0x2105");
    const near = await rpc(file.networks["near:mainnet"]!.rpcUrl, "status", []);
    assert.ok(near.result?.["sync_info"], JSON.stringify(near));
  });

  test("stops both on SIGTERM, with status 0", async () => {
    cli.child.kill("SIGTERM");
    assert.equal(await cli.exited, 0, cli.output());
  });
});

test("a network no family's devnet runs is refused with status 2, naming the ones it runs", async () => {
  const cli = runCli({
    DEVNET_NETWORKS: "eip155:8453,cosmos:cosmoshub-4",
    DEVNET_FILE: "/dev/null",
  });
  assert.equal(await cli.exited, 2, cli.output());
  assert.match(
    cli.output(),
    /unknown network "cosmos:cosmoshub-4"; valid: .*eip155:8453.*near:mainnet/,
  );
});
