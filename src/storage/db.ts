/**
 * Opens the database: PGlite in a data directory by default, or a PostgreSQL
 * server when a URL is given. Both speak the same SQL, so every query and
 * migration is written once.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { Kysely, PostgresDialect, type Dialect } from "kysely";
import pg from "pg";
import { ConnectionLock, PGliteDialect } from "./pgliteDialect.js";
import { PGliteThread } from "./pgliteThread.js";
import { migrateToLatest } from "./migrate.js";
import { lockDataDir } from "./dataDirLock.js";
import { countingDialect, type DbTraffic } from "./countingDialect.js";
import type { Database } from "./schema.js";

export type Db = Kysely<Database>;

export interface OpenDbOptions {
  /** postgres:// URL; when absent, PGlite is used. */
  databaseUrl?: string | undefined;
  /** PGlite directory; `memory://` keeps it in memory (tests). */
  dataDir?: string;
  poolSize?: number;
  /** Told of every statement and round trip (the service's metrics). */
  traffic?: DbTraffic;
}

export interface OpenedDb {
  db: Db;
  /**
   * The same database, for writes that finish work already in flight (a
   * settlement's outcome): on the embedded database they take its one
   * connection before new work waiting for it (pgliteDialect.ts). Absent,
   * or on PostgreSQL's pool: `db`.
   */
  finishing?: Db;
  /**
   * The same database for a transaction's journal entry, the last write
   * before it leaves: on the embedded database it goes after `finishing`'s
   * answers and before new work. Absent, or on PostgreSQL's pool: `db`.
   */
  sending?: Db;
  kind: "pglite" | "postgres";
  close(): Promise<void>;
}

/**
 * PGlite's PostgreSQL settings. The defaults are sized for a database
 * server; an embedded service database needs far less, and this halves its
 * resident memory.
 */
const PGLITE_CONF = [
  "shared_buffers=16MB",
  "wal_buffers=1MB",
  "work_mem=4MB",
  "maintenance_work_mem=16MB",
];

/**
 * Creating a PGlite data directory runs initdb in its own WASM instance,
 * whose memory (about 500 MB) is never returned to the OS. Doing it once in a
 * short-lived child process keeps the service's resident memory small.
 */
async function initDataDirInChild(dir: string): Promise<void> {
  if (existsSync(join(dir, "PG_VERSION"))) return;
  const moduleUrl = import.meta.resolve("@electric-sql/pglite");
  const script = `const { PGlite } = await import(${JSON.stringify(moduleUrl)}); const db = await PGlite.create(process.argv[1]); await db.close();`;
  await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script, dir], {
    timeout: 120_000,
  });
}

const counted = (dialect: Dialect, opts: OpenDbOptions): Dialect =>
  opts.traffic ? countingDialect(dialect, opts.traffic) : dialect;

// numeric and int8 come back as strings by default, which is what we want for
// token amounts; timestamps become Date objects.
export async function openDb(opts: OpenDbOptions): Promise<OpenedDb> {
  if (opts.databaseUrl) {
    const pool = new pg.Pool({ connectionString: opts.databaseUrl, max: opts.poolSize ?? 20 });
    // A dropped idle connection must not crash the process.
    pool.on("error", () => undefined);
    // Nor may one dropped while a query holds it (the server restarted): the
    // query fails with the error, and the pool discards the broken client
    // when it is released. Without a listener of its own, the client's
    // 'error' event would end the process.
    pool.on("connect", (client) => client.on("error", () => undefined));
    const db = new Kysely<Database>({ dialect: counted(new PostgresDialect({ pool }), opts) });
    return { db, kind: "postgres", close: () => db.destroy() };
  }
  const dir = opts.dataDir ?? "memory://";
  let unlock = () => undefined as void;
  if (!dir.startsWith("memory://")) {
    await mkdir(dir, { recursive: true });
    unlock = lockDataDir(dir);
  }
  try {
    if (!dir.startsWith("memory://")) await initDataDirInChild(dir);
    const client = await PGliteThread.open({ dataDir: dir, conf: PGLITE_CONF });
    const lock = new ConnectionLock();
    const db = new Kysely<Database>({ dialect: counted(new PGliteDialect(client, lock), opts) });
    const lane = (name: "answer" | "send") =>
      new Kysely<Database>({ dialect: counted(new PGliteDialect(client, lock, name), opts) });
    const finishing = lane("answer");
    const sending = lane("send");
    return {
      db,
      finishing,
      sending,
      kind: "pglite",
      close: async () => {
        await sending.destroy();
        await finishing.destroy();
        await db.destroy();
        unlock();
      },
    };
  } catch (e) {
    unlock();
    throw e;
  }
}

/**
 * The service's own database, migrated: PostgreSQL at `databaseUrl`, else
 * the embedded one in `pglite/` under the service's data directory.
 */
export function openServiceDb(
  databaseUrl: string | undefined,
  dataDir: string,
  traffic?: DbTraffic,
): Promise<OpenedDb> {
  return openMigratedDb({
    databaseUrl,
    dataDir: join(dataDir, "pglite"),
    ...(traffic ? { traffic } : {}),
  });
}

export async function openMigratedDb(opts: OpenDbOptions): Promise<OpenedDb> {
  const opened = await openDb(opts);
  try {
    await migrateToLatest(opened.db as never);
  } catch (e) {
    await opened.close();
    throw e;
  }
  return opened;
}
