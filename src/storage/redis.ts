/**
 * The Redis client shared by the replicas' rate limits and payer lanes, when configured.
 * Commands fail fast instead of queueing while Redis is away: a rate limit
 * that cannot be counted serves (see http/browserAndLimits.ts) rather than
 * stalls every request.
 */
import { Redis } from "ioredis";
import type { Logger } from "../lib/logger.js";

/** The client, disconnected by the service's closers on shutdown; undefined without a URL. */
export function createRedis(
  url: string | undefined,
  log: Logger,
  closers: (() => unknown)[],
): Redis | undefined {
  if (!url) return undefined;
  const redis = new Redis(url, {
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    lazyConnect: false,
  });
  closers.push(() => redis.disconnect());
  redis.on("error", (e: Error) =>
    log.warn({ err: e.message }, "redis error (rate limits fall back to serving)"),
  );
  return redis;
}
