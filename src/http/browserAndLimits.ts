/**
 * Cross-origin access for browser payers and per-IP rate limits.
 *
 * CORS follows the x402 browser guidance: payment headers may be sent and
 * the payment response headers may be read. Rate limits count per client IP
 * (the proxy's `X-Forwarded-For` is honoured only when `trustProxy` is set),
 * in Redis when one is configured so every replica shares the count.
 */
import cors from "@fastify/cors";
import rateLimit from "@fastify/rate-limit";
import type { FastifyInstance } from "fastify";
import type { Redis } from "ioredis";

export interface BrowserAndLimitsOptions {
  corsOrigins: "*" | readonly string[];
  rateLimitMax: number;
  rateLimitWindowMs: number;
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
];

export async function registerBrowserAndLimits(
  app: FastifyInstance,
  opts: BrowserAndLimitsOptions,
): Promise<void> {
  await app.register(cors, {
    origin: opts.corsOrigins === "*" ? "*" : [...opts.corsOrigins],
    methods: ["GET", "POST", "OPTIONS"],
    allowedHeaders: ALLOWED_REQUEST_HEADERS,
    exposedHeaders: EXPOSED_RESPONSE_HEADERS,
    maxAge: 600,
  });
  if (opts.rateLimitMax <= 0) return;
  await app.register(rateLimit, {
    global: true,
    max: opts.rateLimitMax,
    timeWindow: opts.rateLimitWindowMs,
    ...(opts.redis ? { redis: opts.redis, nameSpace: "x402-facilitator-rl:" } : {}),
    // If Redis is unreachable, serve rather than refuse everyone.
    skipOnError: true,
    keyGenerator: (request) => request.ip,
    errorResponseBuilder: (_request, context) => ({
      statusCode: 429,
      code: "RATE_LIMITED",
      message: `too many requests from this address: at most ${context.max} per ${context.after}; retry after the Retry-After seconds`,
    }),
  });
}
