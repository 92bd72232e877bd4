/**
 * The service in devnet mode as `npm start` runs it (its own process, no
 * configuration but where its files go and its port), and the examples run
 * against it as a person runs them, each its own process.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, signalAndWait, until } from "./processes.js";

export interface DevnetService {
  url: string;
  /** The banner's API key, as the devnet file has it. */
  apiKey: string;
  /** The devnet file the examples read (their `DEVNET_FILE`). */
  file: string;
  /** Everything the service printed, stdout and stderr. */
  output(): string;
  /** Starts an example (`paid-api.ts`, `pay.ts`) with its arguments; resolves once it prints `ready`. */
  example(script: string, args: string[], ready?: RegExp): Promise<Example>;
  /** Stops the examples still running and the service (SIGTERM); the service's exit code. */
  stop(): Promise<number | null>;
}

export interface Example {
  output(): string;
  /** Resolves with the exit code once it ends by itself. */
  exited: Promise<number | null>;
  stop(): Promise<void>;
}

export async function startDevnetService(networks: readonly string[]): Promise<DevnetService> {
  const dir = mkdtempSync(join(tmpdir(), "devnet-service-"));
  const file = join(dir, ".devnet", "devnet.json");
  const port = await freePort();
  const env: Record<string, string | undefined> = {
    ...process.env,
    FACILITATOR_MODE: "devnet",
    DEVNET_NETWORKS: networks.join(","),
    DATA_DIR: join(dir, ".data"),
    DEVNET_FILE: file,
    HOST: "127.0.0.1",
    PORT: String(port),
  };
  // What a person's shell has: none of the tests' settings.
  for (const name of ["DATABASE_URL", "LOG_LEVEL", "NODE_ENV", "NODE_OPTIONS"]) delete env[name];
  let output = "";
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout!.on("data", (c: Buffer) => (output += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (output += c.toString()));
  const examples: ChildProcess[] = [];
  const stop = async () => {
    await Promise.all(examples.map((e) => signalAndWait(e, "SIGTERM")));
    const code = await signalAndWait(child, "SIGTERM");
    rmSync(dir, { recursive: true, force: true });
    return code;
  };
  try {
    // The banner comes once the key is in the devnet file.
    await until(
      "the devnet's banner",
      async () => /3\. Read the API.*\n={78}\n/.test(output),
      180_000,
    );
  } catch (e) {
    await stop();
    throw new Error(`${(e as Error).message}:\n${output}`);
  }
  const { apiKey } = JSON.parse(readFileSync(file, "utf8")) as { apiKey: string };
  return {
    url: `http://127.0.0.1:${port}`,
    apiKey,
    file,
    output: () => output,
    async example(script, args, ready) {
      let printed = "";
      const ex = spawn(process.execPath, ["--import", "tsx", join("examples", script), ...args], {
        env: { ...env, DEVNET_FILE: file },
        stdio: ["ignore", "pipe", "pipe"],
      });
      examples.push(ex);
      ex.stdout!.on("data", (c: Buffer) => (printed += c.toString()));
      ex.stderr!.on("data", (c: Buffer) => (printed += c.toString()));
      const exited = new Promise<number | null>((r) => ex.once("exit", (code) => r(code)));
      if (ready) {
        await Promise.race([
          until(`${script} to be ready`, async () => ready.test(printed), 60_000),
          exited.then((code) => {
            throw new Error(`${script} exited ${code}:\n${printed}`);
          }),
        ]);
      }
      return {
        output: () => printed,
        exited,
        stop: async () => void (await signalAndWait(ex, "SIGTERM")),
      };
    },
    stop,
  };
}
