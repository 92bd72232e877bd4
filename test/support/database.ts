/**
 * Test databases: PGlite in memory always, and a fresh database on a real
 * PostgreSQL server when TEST_DATABASE_URL is set (CI sets it). Suites that
 * touch storage run once per available backend.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { openMigratedDb, type OpenedDb } from "../../src/storage/db.js";
import type { DbTraffic } from "../../src/storage/countingDialect.js";

export type Backend = "pglite" | "postgres";

/**
 * PGlite always; PostgreSQL when TEST_DATABASE_URL is set. In CI (CI set) a
 * missing server is a failure, not a silent skip: .ci/run starts one.
 */
export function availableBackends(): Backend[] {
  if (process.env["TEST_DATABASE_URL"]) return ["pglite", "postgres"];
  if (process.env["CI"]) {
    throw new Error("CI is set but TEST_DATABASE_URL is not: start PostgreSQL (see .ci/run)");
  }
  return ["pglite"];
}

/**
 * Opens a migrated, empty database; `close()` also drops a server database.
 * `traffic` is told of every statement and round trip.
 */
export async function openTestDb(
  backend: Backend,
  traffic?: DbTraffic,
): Promise<OpenedDb & { url?: string }> {
  const counted = traffic ? { traffic } : {};
  if (backend === "pglite") return openMigratedDb({ dataDir: "memory://", ...counted });
  const adminUrl = process.env["TEST_DATABASE_URL"];
  if (!adminUrl) throw new Error("TEST_DATABASE_URL is not set");
  const name = `x402_test_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const opened = await openMigratedDb({ databaseUrl: url.toString(), poolSize: 10, ...counted });
  return {
    ...opened,
    url: url.toString(),
    async close() {
      await opened.close();
      const a = new pg.Client({ connectionString: adminUrl });
      await a.connect();
      await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await a.end();
    },
  };
}
