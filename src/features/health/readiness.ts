/**
 * Readiness: can this replica serve payments right now? Liveness (`/health`)
 * only says the process runs; readiness asks the database, each network's
 * RPC and Redis (when configured), so a load balancer can take a replica out
 * while its dependencies are down, and an operator sees which one.
 *
 * Probes are cheap reads with a short timeout, shared by concurrent callers
 * and reused for a second, so a load balancer polling every replica cannot
 * turn readiness into load on the RPC provider.
 */
import { sql } from "kysely";
import type { Redis } from "ioredis";
import type { NetworkProbe } from "../../chains/ports.js";
import type { Metrics } from "../../lib/metrics.js";
import type { Db } from "../../storage/db.js";

export interface ReadinessReport {
  ready: boolean;
  database: { ok: boolean; error?: string };
  networks: NetworkProbe[];
  redis?: { ok: boolean; error?: string };
}

interface ReadinessChecks {
  database: () => Promise<void>;
  networks: () => Promise<NetworkProbe[]>;
  redis?: () => Promise<void>;
  /** Told every fresh report (metrics). */
  onReport?: (report: ReadinessReport) => void;
  timeoutMs?: number;
  reuseMs?: number;
}

function createReadiness(checks: ReadinessChecks): () => Promise<ReadinessReport> {
  const timeoutMs = checks.timeoutMs ?? 2_000;
  const reuseMs = checks.reuseMs ?? 1_000;
  let last: { at: number; report: Promise<ReadinessReport> } | undefined;

  const outcome = async (run: () => Promise<void>): Promise<{ ok: boolean; error?: string }> => {
    try {
      await withTimeout(run(), timeoutMs);
      return { ok: true };
    } catch (e) {
      return { ok: false, error: e instanceof Error ? e.message : String(e) };
    }
  };

  const fresh = async (): Promise<ReadinessReport> => {
    const [database, networks, redis] = await Promise.all([
      outcome(checks.database),
      withTimeout(checks.networks(), timeoutMs).catch(() => [] as NetworkProbe[]),
      checks.redis ? outcome(checks.redis) : Promise.resolve(undefined),
    ]);
    const report: ReadinessReport = {
      ready: database.ok && networks.every((n) => n.reachable) && (redis?.ok ?? true),
      database,
      networks,
      ...(redis ? { redis } : {}),
    };
    checks.onReport?.(report);
    return report;
  };

  return () => {
    if (!last || Date.now() - last.at > reuseMs) last = { at: Date.now(), report: fresh() };
    return last.report;
  };
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** The service's readiness: its database, its networks, its Redis, reported as a metric too. */
export function serviceReadiness(opts: {
  db: Db;
  networks: () => Promise<NetworkProbe[]>;
  redis: Redis | undefined;
  metrics: Metrics;
}): () => Promise<ReadinessReport> {
  const { redis, metrics } = opts;
  return createReadiness({
    database: async () => void (await sql`select 1`.execute(opts.db)),
    networks: opts.networks,
    ...(redis ? { redis: async () => void (await redis.ping()) } : {}),
    onReport: (report) => {
      for (const n of report.networks) {
        metrics.rpcReachable.set({ network: n.network }, n.reachable ? 1 : 0);
      }
    },
  });
}
