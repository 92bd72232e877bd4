/**
 * The service processes under test: `src/main.ts` in production mode, as an
 * operator runs it, each one a backend of the balancer. The chaos schedule
 * kills them (SIGKILL: no goodbye; SIGTERM: a graceful drain) and starts them
 * again. Each incarnation's resident memory is read once it answers and
 * again at the end, for the memory bound the checks hold it to.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { freePort, until } from "../test/support/processes.js";
import type { Backend } from "./balancer.js";

export interface Replica extends Backend {
  /** Resident memory (bytes) of the current incarnation once it first answered. */
  rssAtStart: number | undefined;
  /** How many times this replica was started. */
  starts: number;
  start(): Promise<void>;
  /** Sends `signal` and waits for the process to exit. */
  stop(signal: NodeJS.Signals): Promise<number | null>;
  /** Resident memory now, in bytes; undefined when not running. */
  rss(): number | undefined;
  readonly running: boolean;
}

export function rssOf(pid: number): number | undefined {
  try {
    const line = readFileSync(`/proc/${pid}/status`, "utf8")
      .split("\n")
      .find((l) => l.startsWith("VmRSS:"));
    return line ? Number(line.replace(/\D+/g, "")) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

export function createReplica(
  name: string,
  env: Record<string, string>,
  onLine: (line: string) => void,
  /** A process ended without being stopped; `served`: after it had answered. */
  onExit: (code: number | null, signal: NodeJS.Signals | null, served: boolean) => void,
): Replica {
  let child: ChildProcess | undefined;
  let stopping = false;
  const replica: Replica = {
    name,
    url: undefined,
    rssAtStart: undefined,
    starts: 0,
    get running() {
      return child !== undefined && child.exitCode === null && child.signalCode === null;
    },
    async start() {
      stopping = false;
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      const c = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
        env: { ...process.env, ...env, HOST: "127.0.0.1", PORT: String(port) },
        stdio: ["ignore", "pipe", "pipe"],
      });
      child = c;
      replica.starts++;
      let tail = "";
      const lines = (d: Buffer) => {
        tail = (tail + d.toString()).slice(-4000);
        for (const line of d.toString().split("\n")) if (line.trim()) onLine(line);
      };
      c.stdout!.on("data", lines);
      c.stderr!.on("data", lines);
      // A process that ends without being stopped crashed (or refused to
      // start): a supervisor starts it again, and the run counts it.
      c.once("exit", (code, signal) => {
        if (stopping || child !== c) return;
        const served = replica.url !== undefined;
        replica.url = undefined;
        onExit(code, signal, served);
      });
      await until(
        `${name} to answer /health`,
        async () => {
          if (c.exitCode !== null) throw new Error(`${name} exited: ${tail}`);
          return (await fetch(`${url}/health`)).ok;
        },
        120_000,
      );
      replica.url = url;
      replica.rssAtStart = rssOf(c.pid!);
    },
    async stop(signal) {
      const c = child;
      if (!c || c.exitCode !== null || c.signalCode !== null) return c?.exitCode ?? null;
      const exited = new Promise<number | null>((r) => c.once("exit", (code) => r(code)));
      // A killed process answers nothing more: the balancer stops sending to it
      // at once. A draining one keeps its address, as a load balancer keeps
      // sending until its health check notices.
      if (signal === "SIGKILL") replica.url = undefined;
      stopping = true;
      c.kill(signal);
      const code = await exited;
      replica.url = undefined;
      return code;
    },
    rss: () => (replica.running ? rssOf(child!.pid!) : undefined),
  };
  return replica;
}
