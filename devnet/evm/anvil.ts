/**
 * Runs one anvil node (the binary from the `@foundry-rs/anvil` npm package)
 * on loopback, and stops it again.
 *
 * Invariants:
 *   - `startAnvil` resolves only once the node answers `eth_chainId` with the
 *     requested chain id, so a caller can send transactions straight away and
 *     can never be talking to some other process that held the port.
 *   - An anvil never outlives the Node process that started it: children are
 *     SIGKILLed on 'exit', and on SIGINT/SIGTERM/SIGHUP when nobody else
 *     handles the signal (a host with its own handler, like the devnet CLI,
 *     stops its nodes itself). A SIGKILLed parent cannot clean up; anvil
 *     then keeps running until killed by hand.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export interface AnvilOptions {
  chainId: number;
  /**
   * Seconds between blocks; 0 mines one block per transaction (automine).
   * Fractions work (anvil accepts e.g. 0.5).
   */
  blockTimeSeconds: number;
  /** Default: a free port picked at start. */
  port?: number;
  /** Loopback only: a devnet holds publicly known keys. */
  host?: "127.0.0.1";
  /**
   * Keep the chain in this file: loaded at start when it exists, written
   * every few seconds and when the node stops, so a restart continues the
   * same chain (same genesis, same balances) instead of a fresh one.
   */
  stateFile?: string;
}

export interface AnvilNode {
  rpcUrl: string;
  port: number;
  /** Resolves once the process has exited. Safe to call more than once. */
  stop(): Promise<void>;
}

const require = createRequire(import.meta.url);
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Room for many payments per block; anvil's default is 30M. */
const BLOCK_GAS_LIMIT = "300000000";
const READY_TIMEOUT_MS = 15_000;
const STOP_GRACE_MS = 2_000;
/** Attempts when a picked free port is taken before anvil binds it. */
const PORT_ATTEMPTS = 3;

/** The anvil binary: the platform package first, the npm bin wrapper second. */
function anvilBinary(): string {
  const arch = process.arch === "x64" ? "amd64" : process.arch;
  const exe = process.platform === "win32" ? "anvil.exe" : "anvil";
  const pkg = `@foundry-rs/anvil-${process.platform}-${arch}`;
  try {
    const bin = join(dirname(require.resolve(`${pkg}/package.json`)), "bin", exe);
    if (existsSync(bin)) return bin;
  } catch {
    // not installed for this platform; try the wrapper below
  }
  const wrapper = join(ROOT, "node_modules", ".bin", exe);
  if (existsSync(wrapper)) return wrapper;
  throw new Error(
    `no anvil binary for ${process.platform}/${process.arch}: install ${pkg} (npm install) or put anvil in node_modules/.bin`,
  );
}

export async function startAnvil(opts: AnvilOptions): Promise<AnvilNode> {
  if (!Number.isInteger(opts.chainId) || opts.chainId <= 0) {
    throw new Error(`chainId must be a positive integer, got ${opts.chainId}`);
  }
  if (!Number.isFinite(opts.blockTimeSeconds) || opts.blockTimeSeconds < 0) {
    throw new Error(`blockTimeSeconds must be 0 or more, got ${opts.blockTimeSeconds}`);
  }
  const binary = anvilBinary();
  for (let attempt = 1; ; attempt++) {
    const port = opts.port ?? (await freePort());
    try {
      return await launch(binary, port, opts);
    } catch (e) {
      // Between closing the probe socket and anvil binding, another process
      // (often another test's anvil) can take the port. Only then retry.
      const retry = opts.port === undefined && attempt < PORT_ATTEMPTS && isPortInUse(e);
      if (!retry) throw e;
    }
  }
}

class AnvilStartError extends Error {
  constructor(
    message: string,
    /** True when the port turned out to be someone else's. */
    readonly portTaken: boolean,
  ) {
    super(message);
  }
}

function isPortInUse(e: unknown): boolean {
  return e instanceof AnvilStartError && e.portTaken;
}

const BIND_FAILURE = /address already in use|os error 98|EADDRINUSE/i;

async function launch(binary: string, port: number, opts: AnvilOptions): Promise<AnvilNode> {
  const host = opts.host ?? "127.0.0.1";
  const args = [
    "--host",
    host,
    "--port",
    String(port),
    "--chain-id",
    String(opts.chainId),
    // Every devnet account is funded with anvil_setBalance; anvil's own ten
    // would only be a second, unused set of well-known keys.
    "--accounts",
    "0",
    "--gas-limit",
    BLOCK_GAS_LIMIT,
    // Per-request logging from anvil would drown the service's own logs.
    "--silent",
  ];
  if (opts.blockTimeSeconds > 0) args.push("--block-time", String(opts.blockTimeSeconds));
  // Written on a clean stop too; the interval bounds what a crash can lose.
  if (opts.stateFile) args.push("--state", opts.stateFile, "--state-interval", "5");

  // stdout is ignored, not piped: an unread pipe fills up and stalls anvil.
  const child = spawn(binary, args, { stdio: ["ignore", "ignore", "pipe"] });
  track(child);
  let stderr = "";
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (chunk: string) => {
    stderr = (stderr + chunk).slice(-8000);
  });
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  let spawnError: Error | undefined;
  child.once("error", (e) => {
    spawnError = e; // e.g. EACCES; 'exit' may never follow
  });

  const rpcUrl = `http://${host}:${port}`;
  const label = `anvil (chain ${opts.chainId}, port ${port})`;
  const stop = once(() => terminate(child, exited));
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (spawnError) {
      throw new AnvilStartError(`${label} could not start: ${spawnError.message}`, false);
    }
    if (child.exitCode !== null || child.signalCode !== null) {
      // Let the last stderr bytes arrive before quoting them.
      await new Promise((r) => setTimeout(r, 20));
      throw new AnvilStartError(
        `${label} exited during start (${child.exitCode ?? child.signalCode}): ${stderr.trim() || "no output"}`,
        BIND_FAILURE.test(stderr),
      );
    }
    const answer = await chainIdAt(rpcUrl);
    if (answer === opts.chainId) break;
    if (answer !== undefined) {
      await stop();
      throw new AnvilStartError(
        `${label}: ${rpcUrl} answers with chain id ${answer}; another node holds that port`,
        true,
      );
    }
    if (Date.now() > deadline) {
      await stop();
      throw new AnvilStartError(
        `${label} did not answer on ${rpcUrl} within ${READY_TIMEOUT_MS / 1000} s: ${stderr.trim() || "no output"}`,
        false,
      );
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { rpcUrl, port, stop };
}

/** The node's chain id, or undefined while nothing (valid) answers. */
async function chainIdAt(rpcUrl: string): Promise<number | undefined> {
  try {
    const res = await fetch(rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
      signal: AbortSignal.timeout(1000),
    });
    if (!res.ok) return undefined;
    const body = (await res.json()) as { result?: unknown };
    return typeof body.result === "string" ? Number(body.result) : undefined;
  } catch {
    return undefined; // not listening yet
  }
}

/** A port the OS just handed out on loopback, released for anvil to take. */
function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => (port ? resolvePort(port) : reject(new Error("no free port"))));
    });
  });
}

async function terminate(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), STOP_GRACE_MS);
  await exited;
  clearTimeout(timer);
}

function once<T>(fn: () => Promise<T>): () => Promise<T> {
  let result: Promise<T> | undefined;
  return () => (result ??= fn());
}

// ---- cleanup when the parent goes away ----

const running = new Set<ChildProcess>();
let hooksInstalled = false;

function track(child: ChildProcess): void {
  running.add(child);
  child.once("exit", () => running.delete(child));
  if (!hooksInstalled) {
    hooksInstalled = true;
    // 'exit' handlers must be synchronous; kill() is.
    process.once("exit", killAll);
    for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
      const onSignal = (): void => {
        // Someone else handles this signal: they own shutdown (and the
        // 'exit' hook still catches whatever they leave behind).
        if (process.listenerCount(signal) > 1) return;
        killAll();
        // Do what the signal would have done had we not listened.
        process.removeListener(signal, onSignal);
        process.kill(process.pid, signal);
      };
      process.on(signal, onSignal);
    }
  }
}

function killAll(): void {
  for (const child of running) child.kill("SIGKILL");
}
