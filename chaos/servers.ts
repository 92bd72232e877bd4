/**
 * The chaos run's own PostgreSQL and Redis, started from the installed
 * servers (as CI's `.ci/run` does) in a temporary directory on free loopback
 * ports, so the run can restart PostgreSQL and take Redis down without
 * touching anyone else's servers. A missing binary is one line naming it.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { freePort, until } from "../test/support/processes.js";

const run = promisify(execFile);

/** Thrown when a server binary is not installed; its message is the one line to print. */
export class MissingBinary extends Error {}

/** The directory holding initdb/pg_ctl: on PATH, else Debian's newest /usr/lib/postgresql/N/bin. */
function postgresBin(): string {
  for (const dir of (process.env["PATH"] ?? "").split(":")) {
    if (dir && existsSync(join(dir, "pg_ctl")) && existsSync(join(dir, "initdb"))) return dir;
  }
  const debian = "/usr/lib/postgresql";
  const versions = existsSync(debian)
    ? readdirSync(debian).sort((a, b) => Number(b) - Number(a))
    : [];
  for (const v of versions) {
    const bin = join(debian, v, "bin");
    if (existsSync(join(bin, "pg_ctl"))) return bin;
  }
  throw new MissingBinary(
    "chaos: PostgreSQL is not installed (no initdb/pg_ctl on PATH or in /usr/lib/postgresql/*/bin); install the postgresql package",
  );
}

function redisBin(): string {
  for (const dir of (process.env["PATH"] ?? "").split(":")) {
    if (dir && existsSync(join(dir, "redis-server"))) return join(dir, "redis-server");
  }
  throw new MissingBinary(
    "chaos: Redis is not installed (no redis-server on PATH); install the redis-server package",
  );
}

export interface ChaosPostgres {
  url: string;
  /** Stops the server (fast: open connections are cut), waits `downMs`, starts it again. */
  restart(downMs: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * initdb refuses to run as root, so as root (a CI container) the cluster
 * belongs to the `postgres` user and its commands run as that user.
 */
async function asPostgresUser(cmd: string, args: string[]): Promise<void> {
  if (process.getuid?.() === 0) {
    const quoted = [cmd, ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(" ");
    await run("su", ["postgres", "-s", "/bin/sh", "-c", quoted]);
  } else {
    await run(cmd, args);
  }
}

export async function startPostgres(): Promise<ChaosPostgres> {
  const bin = postgresBin();
  const dir = mkdtempSync(join(tmpdir(), "x402-chaos-pg-"));
  if (process.getuid?.() === 0) {
    const { stdout } = await run("id", ["-u", "postgres"]);
    const { stdout: gid } = await run("id", ["-g", "postgres"]);
    chownSync(dir, Number(stdout.trim()), Number(gid.trim()));
  }
  const data = join(dir, "data");
  const port = await freePort();
  await asPostgresUser(join(bin, "initdb"), ["-D", data, "-A", "trust", "-U", "postgres"]);
  const pgCtl = (...args: string[]) =>
    asPostgresUser(join(bin, "pg_ctl"), ["-D", data, "-l", join(dir, "server.log"), ...args]);
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off`;
  const start = () => pgCtl("-o", options, "-w", "start");
  await start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    async restart(downMs) {
      await pgCtl("-m", "fast", "-w", "stop");
      await new Promise((r) => setTimeout(r, downMs));
      await start();
    },
    async stop() {
      await pgCtl("-m", "fast", "-w", "stop").catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface ChaosRedis {
  url: string;
  /** Stops Redis, and starts it again on the same port after `downMs`. */
  outage(downMs: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startRedis(): Promise<ChaosRedis> {
  const binary = redisBin();
  const port = await freePort();
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn(
      binary,
      ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
      { stdio: "ignore" },
    );
    await until(
      "redis-server to listen",
      async () => {
        return (await ping(port)).includes("PONG");
      },
      15_000,
    );
  };
  const stop = async () => {
    const c = child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise((r) => c.once("exit", r));
    c.kill("SIGTERM");
    await exited;
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    async outage(downMs) {
      await stop();
      await new Promise((r) => setTimeout(r, downMs));
      await start();
    },
    stop,
  };
}

/** Redis's answer to an inline PING, or "" when nothing listens. */
function ping(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    let answer = "";
    socket.on("data", (d) => {
      answer += d.toString();
      socket.end();
    });
    socket.on("connect", () => socket.write("PING\r\n"));
    socket.on("close", () => resolve(answer));
    socket.on("error", () => resolve(""));
  });
}
