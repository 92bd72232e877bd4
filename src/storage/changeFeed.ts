/**
 * Change notices between the replicas that share one PostgreSQL server,
 * through `LISTEN`/`NOTIFY`: a replica (or the operator CLI) that changes
 * something other replicas cache announces it in the same database, and
 * every listening replica hears it at once. No other service is needed:
 * several replicas already require a PostgreSQL server.
 *
 * The listener holds one connection of its own and reconnects after a
 * failure; since notices sent while it was away are lost, it reports a
 * reconnection as a change, so caches are dropped rather than trusted.
 * With the embedded database (one process) there is nobody to tell.
 */
import pg from "pg";
import { sql } from "kysely";
import type { Logger } from "../lib/logger.js";
import type { Db } from "./db.js";

export interface ChangeFeed {
  close(): Promise<void>;
}

/** Announces a change on `channel` (delivered when the surrounding transaction commits). */
export async function announceChange(db: Db, channel: string): Promise<void> {
  await sql`select pg_notify(${channel}, '')`.execute(db);
}

/** Calls `onChange` for every notice on `channel`; a no-op without a server URL. */
export function listenForChanges(
  databaseUrl: string | undefined,
  channel: string,
  onChange: () => void,
  log: Logger,
): ChangeFeed {
  if (!databaseUrl) return { close: async () => {} };
  if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`bad channel name ${channel}`);
  let client: pg.Client | undefined;
  let closed = false;
  let retry: NodeJS.Timeout | undefined;

  const connect = async (): Promise<void> => {
    const c = new pg.Client({ connectionString: databaseUrl });
    client = c;
    const lost = (why: string) => {
      if (closed || client !== c) return;
      client = undefined;
      log.warn({ channel, err: why }, "change feed lost its connection; reconnecting");
      c.end().catch(() => undefined);
      retry = setTimeout(() => void connect(), 1_000);
      retry.unref();
    };
    c.on("error", (e: Error) => lost(e.message));
    c.on("end", () => lost("connection ended"));
    c.on("notification", (n) => {
      if (n.channel === channel) onChange();
    });
    try {
      await c.connect();
      await c.query(`LISTEN ${channel}`);
      // Anything announced while we were not listening is unknown: treat it as changed.
      onChange();
    } catch (e) {
      lost((e as Error).message);
    }
  };
  void connect();
  return {
    async close() {
      closed = true;
      if (retry) clearTimeout(retry);
      await client?.end().catch(() => undefined);
    },
  };
}
