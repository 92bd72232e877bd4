/** Helpers for tests that run the service as a separate process. */
import { spawn, type ChildProcess, type StdioOptions } from "node:child_process";
import { createServer } from "node:net";

/** A free loopback port. */
export async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** Polls `fn` until it returns something truthy, or fails after `ms`. */
export async function until<T>(
  what: string,
  fn: () => Promise<T | undefined | false>,
  ms = 30_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Sends `signal` and resolves with the exit code once the process has been
 * reaped. A killed process keeps its pid until then, so anything that checks
 * whether that pid is alive (the embedded database's lock) must wait for this.
 */
export async function signalAndWait(
  child: ChildProcess,
  signal: NodeJS.Signals,
): Promise<number | null> {
  const exited =
    child.exitCode !== null || child.signalCode !== null
      ? Promise.resolve(child.exitCode)
      : new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  child.kill(signal);
  return exited;
}

/**
 * Starts the service (`src/main.ts`) as a process of its own and waits until
 * `url`'s /health answers. A cold start compiles the service first, which
 * takes a busy machine well over 30 s, hence the two minutes. A start that
 * never answers kills the process before failing: a process left running
 * would keep the test file's runner waiting for ever.
 */
export async function startServiceProcess(
  url: string,
  env: NodeJS.ProcessEnv,
  stdio: StdioOptions = ["ignore", "ignore", "inherit"],
): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], { env, stdio });
  try {
    await until("the service to answer", async () => (await fetch(`${url}/health`)).ok, 120_000);
    return child;
  } catch (e) {
    await signalAndWait(child, "SIGKILL");
    throw e;
  }
}
