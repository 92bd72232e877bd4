/**
 * Cross-origin access for browser payers, and the rate limits.
 *
 * CORS follows the x402 browser guidance: payment headers may be sent and
 * the payment response headers may be read. Rate limits (rateLimits.ts)
 * count per API key by plan on the routes that take a key, and per client
 * IP elsewhere (the proxy's `X-Forwarded-For` is honoured only when
 * `trustProxy` is set), in Redis when one is configured so every replica
 * shares the count.
 */
import cors from "@fastify/cors";
import type { FastifyInstance } from "fastify";
import type { Redis } from "ioredis";
import type { PlanRequestLimits } from "../features/plans/plans.js";
import { registerRateLimits, type KeyedRateLimits } from "./rateLimits.js";

export interface BrowserAndLimitsOptions {
  corsOrigins: "*" | readonly string[];
  /** Requests per client IP per window (routes without a key, refused keys); 0: none. */
  rateLimitMax: number;
  rateLimitWindowMs: number;
  /** Requests per API key per window by the account's plan; undefined: keys are not limited. */
  keyRateLimits?: PlanRequestLimits | undefined;
  redis?: Redis | undefined;
}

const ALLOWED_REQUEST_HEADERS = ["Content-Type", "X-API-Key", "PAYMENT-SIGNATURE", "X-PAYMENT"];
const EXPOSED_RESPONSE_HEADERS = [
  "PAYMENT-REQUIRED",
  "PAYMENT-RESPONSE",
  "X-PAYMENT-RESPONSE",
  "EXTENSION-RESPONSES",
  "X-Request-Id",
  "Retry-After",
  "X-RateLimit-Limit",
  "X-RateLimit-Remaining",
  "X-RateLimit-Reset",
];

/** Registers CORS and the rate limits; returns what the API key check counts with. */
export async function registerBrowserAndLimits(
  app: FastifyInstance,
  opts: BrowserAndLimitsOptions,
): Promise<KeyedRateLimits> {
  await app.register(cors, {
    origin: opts.corsOrigins === "*" ? "*" : [...opts.corsOrigins],
    methods: ["GET", "POST", "OPTIONS"],
    allowedHeaders: ALLOWED_REQUEST_HEADERS,
    exposedHeaders: EXPOSED_RESPONSE_HEADERS,
    maxAge: 600,
  });
  return registerRateLimits(app, {
    addressMax: opts.rateLimitMax,
    addressWindowMs: opts.rateLimitWindowMs,
    keys: opts.keyRateLimits,
    redis: opts.redis,
  });
}
