/**
 * What must hold before anything starts: the data directory is ours, and
 * the port is free. Both are checked first, before the devnet's chains and
 * sign-in providers or the database, because a start that finds out only
 * when it listens has by then resumed the other process's chains from the
 * same files and rewritten its devnet file. A refusal is one line: what is
 * in the way and the setting that gets around it.
 */
import { mkdirSync } from "node:fs";
import { createServer } from "node:net";
import type { Config } from "./config/index.js";
import { DataDirInUseError, lockDataDir } from "./storage/dataDirLock.js";

/** A start that cannot go ahead; its message is the one line a person reads. */
export class StartRefused extends Error {
  override name = "StartRefused";
}

type StartConfig = Pick<Config, "mode" | "dataDir" | "databaseUrl" | "host" | "port">;

/**
 * Claims the data directory for this process when anything lives there (the
 * embedded database, or the devnet's chains); returns its release. With a
 * PostgreSQL server in production it holds nothing, so replicas may share it.
 */
export function claimDataDir(config: StartConfig): () => void {
  if (config.mode !== "devnet" && config.databaseUrl) return () => undefined;
  mkdirSync(config.dataDir, { recursive: true });
  try {
    return lockDataDir(config.dataDir);
  } catch (e) {
    if (!(e instanceof DataDirInUseError)) throw e;
    const beside =
      config.mode === "devnet"
        ? `run this one beside it: DATA_DIR=${config.dataDir}-2 DEVNET_FILE=.devnet-2/devnet.json PORT=${otherPort(config.port)} npm start`
        : "set DATA_DIR to another directory, or DATABASE_URL to share a PostgreSQL server";
    throw new StartRefused(
      `cannot start: another facilitator (process ${e.pid}) is using the data directory ${config.dataDir}; stop it, or ${beside}`,
    );
  }
}

/** Refuses when the port is taken, by listening on it for a moment. */
export async function checkPortFree(config: StartConfig): Promise<void> {
  if (config.port === 0) return;
  try {
    await new Promise<void>((resolve, reject) => {
      const probe = createServer();
      probe.once("error", reject);
      probe.listen({ host: config.host, port: config.port, exclusive: true }, () =>
        probe.close(() => resolve()),
      );
    });
  } catch (e) {
    throw refusalFor(e, config) ?? e;
  }
}

/** The one line for a listen error (also when another process took the port since the check). */
export function refusalFor(e: unknown, config: StartConfig): StartRefused | undefined {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  const where = `port ${config.port} on ${config.host}`;
  if (code === "EADDRINUSE") {
    return new StartRefused(
      `cannot start: ${where} is in use (another facilitator, or another program); stop it, or choose another port: PORT=${otherPort(config.port)} npm start`,
    );
  }
  if (code === "EACCES") {
    return new StartRefused(
      `cannot start: ${where} needs privileges this process lacks; choose a port above 1023: PORT=${otherPort(config.port)} npm start`,
    );
  }
  if (code === "EADDRNOTAVAIL") {
    return new StartRefused(
      `cannot start: ${config.host} is not an address of this machine; set HOST (127.0.0.1 listens on loopback only)`,
    );
  }
  return undefined;
}

function otherPort(port: number): number {
  return port >= 1024 && port < 65_000 ? port + 10 : 4030;
}
