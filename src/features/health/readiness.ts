/**
 * Readiness: can this replica serve payments right now? Liveness (`/health`)
 * only says the process runs; readiness asks the database, each network's
 * RPC and Redis (when configured), so a load balancer can take a replica out
 * while its dependencies are down, and an operator sees which one.
 *
 * Probes are cheap reads with a short timeout, shared by concurrent callers
 * and reused for a second, so a load balancer polling every replica cannot
 * turn readiness into load on the RPC provider.
 *
 * /ready is public, so what it shows is `publicReadiness`: which dependency
 * is up, per network too, and nothing else. Driver messages name hosts,
 * users and databases, and RPC hosts name the provider (some put an
 * account's endpoint in the host name): those go to the log, once each
 * time the set of problems changes.
 *
 * `x402_rpc_reachable` is set by every fresh report, and a scrape asks for
 * one (or reuses the last second's): an operator whose load balancer does
 * not poll /ready still gets a current value to alert on, not the answer
 * of whenever /ready was last asked.
 */
import { sql } from "kysely";
import type { Redis } from "ioredis";
import { Gauge } from "prom-client";
import type { NetworkProbe } from "../../chains/ports.js";
import type { Logger } from "../../lib/logger.js";
import type { Metrics } from "../../lib/metrics.js";
import type { Db } from "../../storage/db.js";
import type { ReplicaGuard } from "./replicaGuard.js";

export interface ReadinessReport {
  ready: boolean;
  database: { ok: boolean; error?: string };
  networks: NetworkProbe[];
  redis?: { ok: boolean; error?: string };
  /** Present when replicas are counted: false while this one must refuse payments (replicaGuard.ts). */
  replicas?: { ok: boolean; error?: string };
}

/** What GET /ready shows: up or down per dependency and per network, no details. */
export interface PublicReadiness {
  ready: boolean;
  database: { ok: boolean };
  networks: { network: string; reachable: boolean }[];
  redis?: { ok: boolean };
  replicas?: { ok: boolean };
}

export function publicReadiness(report: ReadinessReport): PublicReadiness {
  return {
    ready: report.ready,
    database: { ok: report.database.ok },
    networks: report.networks.map((n) => ({ network: n.network, reachable: n.reachable })),
    ...(report.redis ? { redis: { ok: report.redis.ok } } : {}),
    ...(report.replicas ? { replicas: { ok: report.replicas.ok } } : {}),
  };
}

/** The details of what is down, for the log. */
function problemsOf(report: ReadinessReport): Record<string, unknown>[] {
  return [
    ...(report.database.ok ? [] : [{ dependency: "database", error: report.database.error }]),
    ...report.networks
      .filter((n) => !n.reachable)
      .map((n) => ({ dependency: "rpc", network: n.network, host: n.host, error: n.error })),
    ...(report.redis && !report.redis.ok
      ? [{ dependency: "redis", error: report.redis.error }]
      : []),
    ...(report.replicas && !report.replicas.ok
      ? [{ dependency: "replicas", error: report.replicas.error }]
      : []),
  ];
}

interface ReadinessChecks {
  database: () => Promise<void>;
  networks: () => Promise<NetworkProbe[]>;
  redis?: () => Promise<void>;
  /** Why this replica must not serve (absent: replicas are not counted). */
  replicas?: () => string | undefined;
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
    const refusal = checks.replicas?.();
    const replicas = checks.replicas
      ? { ok: refusal === undefined, ...(refusal ? { error: refusal } : {}) }
      : undefined;
    const report: ReadinessReport = {
      ready:
        database.ok &&
        networks.every((n) => n.reachable) &&
        (redis?.ok ?? true) &&
        (replicas?.ok ?? true),
      database,
      networks,
      ...(redis ? { redis } : {}),
      ...(replicas ? { replicas } : {}),
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
  /** Counts replicas (absent on the embedded database, which has none). */
  replicaGuard?: Pick<ReplicaGuard, "refusal"> | undefined;
  metrics: Pick<Metrics, "registry">;
  log: Logger;
}): () => Promise<ReadinessReport> {
  const { redis, log } = opts;
  const rpcReachable = new Gauge({
    name: "x402_rpc_reachable",
    help: "1 when the network's RPC answered the last readiness probe (a scrape runs one), 0 when it did not",
    labelNames: ["network"],
    registers: [opts.metrics.registry],
    // The probe's onReport sets the values this scrape shows.
    collect: async () => void (await readiness()),
  });
  // Logged when the set of problems changes, not on every probe: a load
  // balancer polling through an outage would otherwise fill the log.
  let lastProblems = "[]";
  const readiness = createReadiness({
    database: async () => void (await sql`select 1`.execute(opts.db)),
    networks: opts.networks,
    ...(redis ? { redis: async () => void (await redis.ping()) } : {}),
    ...(opts.replicaGuard ? { replicas: () => opts.replicaGuard!.refusal() } : {}),
    onReport: (report) => {
      for (const n of report.networks) {
        rpcReachable.set({ network: n.network }, n.reachable ? 1 : 0);
      }
      const problems = problemsOf(report);
      const key = JSON.stringify(problems);
      if (key === lastProblems) return;
      lastProblems = key;
      if (problems.length === 0) log.info("ready again: every dependency answers");
      else log.warn({ problems }, "not ready");
    },
  });
  return readiness;
}
