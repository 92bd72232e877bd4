/**
 * Replicas without Redis fail closed.
 *
 * Rate limits per key and per IP, and each payer's one settle in flight,
 * are shared between replicas through Redis only: without it every process
 * counts alone, so two replicas double every limit and let one payer run a
 * settle on each at once (the burst the payer lanes exist to stop). One
 * process needs no Redis; two without it must not serve payments.
 *
 * Every replica on a database server announces itself in
 * `facilitator_replicas` (the table the signer leases count replicas in,
 * under the same holder id) and reads who else is live: a row renewed
 * since its last look, so another replica is found within one interval. Where Redis is
 * required (production on a database server without `REDIS_URL`) and
 * another replica is live, `refusal()` names the problem: payments answer
 * 503 with it and readiness is false, until the other replica stops or
 * every replica has Redis. The embedded database is single-process, so it
 * never has company.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { sql } from "kysely";
import type { Redis } from "ioredis";
import type { Logger } from "../../lib/logger.js";
import type { Db, OpenedDb } from "../../storage/db.js";
import { createRedis } from "../../storage/redis.js";

/** This process's id among the replicas: host, process and a random part (pids repeat in containers). */
export function newReplicaId(): string {
  return `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
}

/** Another replica's row as last read: its expiry, and when it was last seen renewed. */
interface Seen {
  expires: number;
  advancedAt?: number;
}

export interface ReplicaGuard {
  /** Why this replica must not serve payments now, or undefined. */
  refusal(): string | undefined;
  close(): Promise<void>;
}

export const REPLICAS_WITHOUT_REDIS =
  "another replica of this service is running on the same database and REDIS_URL is not set: rate limits and each payer's one settle in flight cannot be shared, so payments are refused until every replica has REDIS_URL or only one runs";

async function startReplicaGuard(opts: {
  db: Db;
  /** This process's id in `facilitator_replicas` (the signer leases' holder). */
  holder: string;
  /** Whether another live replica makes this one refuse (production on a server, no Redis). */
  redisRequired: boolean;
  log: Logger;
  /** How often the row is renewed and the others counted. */
  intervalMs?: number;
}): Promise<ReplicaGuard> {
  const intervalMs = opts.intervalMs ?? 10_000;
  // Three missed renewals before the others count this one gone.
  const ttlMs = 3 * intervalMs;
  let others = 0;
  let lastSeen = new Map<string, Seen>();
  let stopped = false;

  const check = async (): Promise<void> => {
    try {
      const until = new Date(Date.now() + ttlMs);
      await opts.db
        .insertInto("facilitator_replicas")
        .values({ holder: opts.holder, expires_at: until })
        .onConflict((oc) =>
          oc.column("holder").doUpdateSet({
            expires_at: sql<Date>`greatest(facilitator_replicas.expires_at, ${until})`,
          }),
        )
        .execute();
      const rows = await opts.db
        .selectFrom("facilitator_replicas")
        .select(["holder", "expires_at"])
        .where("holder", "<>", opts.holder)
        .where("expires_at", ">", sql<Date>`now()`)
        .execute();
      // Live is renewed since the last look: a replica that died (SIGKILL,
      // a crash) leaves a row that is unexpired for a while but never moves,
      // so a restart after it is not refused for the dead one's sake.
      // Remembered for a few looks, so one look that falls between two of
      // its renewals does not let payments through.
      const at = Date.now();
      const looked = new Map<string, Seen>();
      for (const r of rows) {
        const expires = new Date(r.expires_at).getTime();
        const before = lastSeen.get(r.holder);
        const advancedAt = before && expires > before.expires ? at : before?.advancedAt;
        looked.set(r.holder, { expires, ...(advancedAt ? { advancedAt } : {}) });
      }
      lastSeen = looked;
      const seen = [...looked.values()].filter(
        (r) => r.advancedAt !== undefined && at - r.advancedAt <= 2.5 * intervalMs,
      ).length;
      if (opts.redisRequired && seen > 0 !== others > 0) {
        if (seen > 0) opts.log.error({ otherReplicas: seen }, REPLICAS_WITHOUT_REDIS);
        else opts.log.info("no other replica is live: payments are served again");
      }
      others = seen;
    } catch (e) {
      // The database is down: payments fail on it anyway, and readiness says so.
      opts.log.warn({ err: String(e) }, "could not count the live replicas");
    }
  };

  // Known before the first request is served.
  await check();
  const timer = setInterval(() => void check(), intervalMs);
  timer.unref();
  return {
    refusal: () => (opts.redisRequired && others > 0 ? REPLICAS_WITHOUT_REDIS : undefined),
    async close() {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      await opts.db
        .deleteFrom("facilitator_replicas")
        .where("holder", "=", opts.holder)
        .execute()
        .catch(() => undefined);
    },
  };
}

/**
 * What the replicas share: the Redis client of their rate limits and payer
 * lanes (when configured), and the guard that refuses payments where
 * production replicas on one database server run without it (none on the
 * embedded database). Both close with the service's closers.
 */
export async function openReplicaSharing(opts: {
  database: Pick<OpenedDb, "db" | "kind">;
  config: { mode: "devnet" | "production"; redisUrl: string | undefined };
  replicaId: string;
  log: Logger;
  closers: (() => unknown)[];
  intervalMs?: number | undefined;
}): Promise<{ redis: Redis | undefined; replicaGuard: ReplicaGuard | undefined }> {
  const { database, config, log } = opts;
  const redis = createRedis(config.redisUrl, log, opts.closers);
  if (database.kind === "pglite") return { redis, replicaGuard: undefined };
  const replicaGuard = await startReplicaGuard({
    ...{ db: database.db, holder: opts.replicaId, log: log.child({ component: "replicas" }) },
    redisRequired: config.mode === "production" && !config.redisUrl,
    ...(opts.intervalMs ? { intervalMs: opts.intervalMs } : {}),
  });
  opts.closers.push(() => replicaGuard.close());
  return { redis, replicaGuard };
}
