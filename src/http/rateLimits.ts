/**
 * Request rate limits: per account, by its plan, on the routes
 * that take an `X-API-Key`; per client IP on every other route and on every
 * request whose key is refused.
 *
 * A resource server often fronts many agents from one address, so an
 * address is the wrong unit for paid calls: a request with a valid key
 * counts against its account's budget only (all its keys together, so
 * deleting a key and creating another never starts a fresh window, and more
 * keys never buy more requests), never against its IP. The IP budget
 * guards what anyone may call without a key, and counts every missing,
 * malformed, wrong or revoked key, so guessing keys is limited too.
 *
 * The counts are @fastify/rate-limit's fixed windows: in Redis when one is
 * configured (every replica shares one count per key and per IP), in this
 * process otherwise. If Redis cannot be reached the request is served
 * uncounted rather than refused.
 */
import rateLimit, { normalizeIP } from "@fastify/rate-limit";
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from "fastify";
import type { Redis } from "ioredis";
import { UPGRADE_PATH, type PlanRequestLimits } from "../features/plans/plans.js";
import { sendError } from "./errorEnvelope.js";

export interface RateLimitOptions {
  /** Requests per client IP per window; 0: no per-IP limit. */
  addressMax: number;
  addressWindowMs: number;
  /** Requests per API key per window by plan; undefined: keys are not limited. */
  keys?: PlanRequestLimits | undefined;
  redis?: Redis | undefined;
}

/** What the API key check calls once it knows whether the key is valid. */
export interface KeyedRateLimits {
  /** Counts a refused key against the client IP: a reply (429) once over, else undefined. */
  refusedKey(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined>;
  /** Counts a valid key's request against its plan: a reply (429) once over, else undefined. */
  validKey(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined>;
}

const NO_LIMITS: KeyedRateLimits = {
  refusedKey: async () => undefined,
  validKey: async () => undefined,
};

/** Counters one process keeps without Redis (keys and addresses); past it the least recent are dropped. */
const IN_PROCESS_COUNTERS = 100_000;

/**
 * Registers the counters and the per-IP limit of every route without API key
 * authentication registered from now on; returns what the API key check
 * uses. Call before the routes are registered.
 */
export async function registerRateLimits(
  app: FastifyInstance,
  opts: RateLimitOptions,
): Promise<KeyedRateLimits> {
  const keys = opts.keys;
  const addressLimited = opts.addressMax > 0;
  const anyKeyLimited = keys !== undefined && Object.values(keys.perPlan).some((n) => n > 0);
  if (!addressLimited && !anyKeyLimited) return NO_LIMITS;

  // One store, two kinds of subject: `account:<id>` for a valid key (the
  // account's budget, its plan's), `ip:<address>` for everything else.
  const keyLimitOf = (request: FastifyRequest) => keys?.perPlan[request.keyPlan ?? "free"] ?? 0;
  await app.register(rateLimit, {
    global: false,
    keyGenerator: (request) =>
      request.principal
        ? `account:${request.principal.accountId}`
        : `ip:${normalizeIP(request.ip)}`,
    max: (request) => (request.principal ? keyLimitOf(request) : opts.addressMax),
    timeWindow: (request) => (request.principal && keys ? keys.windowMs : opts.addressWindowMs),
    ...(opts.redis ? { redis: opts.redis, nameSpace: "x402-facilitator-rl:" } : {}),
    cache: IN_PROCESS_COUNTERS,
    // If Redis is unreachable, serve rather than refuse everyone.
    skipOnError: true,
  });
  const count = app.createRateLimit();

  /** Counts the request and sets the X-RateLimit-* headers; the budget when it is over it. */
  const over = async (request: FastifyRequest, reply: FastifyReply) => {
    const r = await count(request);
    if (r.isAllowed) return undefined;
    const resetSeconds = Math.max(1, r.ttlInSeconds);
    reply.header("X-RateLimit-Limit", r.max);
    reply.header("X-RateLimit-Remaining", r.remaining);
    reply.header("X-RateLimit-Reset", resetSeconds);
    if (!r.isExceeded) return undefined;
    reply.header("Retry-After", resetSeconds);
    return { max: r.max, windowMs: r.timeWindow };
  };

  const limitAddress = async (
    request: FastifyRequest,
    reply: FastifyReply,
    refusedKey: boolean,
  ) => {
    if (!addressLimited) return undefined;
    const exceeded = await over(request, reply);
    if (!exceeded) return undefined;
    return sendError(
      reply,
      "rate_limited",
      `too many requests from this address: at most ${exceeded.max} per ${describeWindow(exceeded.windowMs)}${
        refusedKey ? " without a valid X-API-Key" : ""
      }; retry after the Retry-After seconds`,
    );
  };

  if (addressLimited) {
    const byAddress: onRequestHookHandler = async (request, reply) =>
      limitAddress(request, reply, false);
    app.addHook("onRoute", (route) => {
      if (route.config?.auth === "apiKey") return;
      const hooks = route.onRequest;
      route.onRequest = [...(Array.isArray(hooks) ? hooks : hooks ? [hooks] : []), byAddress];
    });
  }

  return {
    refusedKey: (request, reply) => limitAddress(request, reply, true),
    async validKey(request, reply) {
      if (!request.principal || keyLimitOf(request) <= 0) return undefined;
      const exceeded = await over(request, reply);
      if (!exceeded) return undefined;
      const plan = request.keyPlan ?? "free";
      return sendError(
        reply,
        "rate_limited",
        `this API key's account is over its plan's rate limit: the ${plan} plan allows ${exceeded.max} requests per ${describeWindow(exceeded.windowMs)} for the account, all its keys together; retry after the Retry-After seconds, or move the account to a larger plan for a higher limit (see ${UPGRADE_PATH})`,
        {
          plan,
          limit: exceeded.max,
          windowSeconds: exceeded.windowMs / 1000,
          upgrade: UPGRADE_PATH,
        },
      );
    },
  };
}

/** "minute", "10 seconds", "1500 ms": a window as a message reads it. */
function describeWindow(ms: number): string {
  if (ms % 60_000 === 0) return ms === 60_000 ? "minute" : `${ms / 60_000} minutes`;
  if (ms % 1000 === 0) return ms === 1000 ? "second" : `${ms / 1000} seconds`;
  return `${ms} ms`;
}
