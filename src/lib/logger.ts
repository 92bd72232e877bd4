/**
 * The process logger. Redaction is configured here, once, so that no code
 * path can log a private key, an API key, a webhook secret or an RPC URL's
 * path (where providers put their keys) by accident.
 */
import { pino, type Logger } from "pino";
import { redactUrls, redactUrlsDeep } from "./redactUrls.js";

const REDACT_PATHS = [
  "apiKey",
  "*.apiKey",
  "privateKey",
  "*.privateKey",
  "privateKeys",
  "*.privateKeys",
  "secret",
  "*.secret",
  'req.headers["x-api-key"]',
  "req.headers.authorization",
  "headers['x-api-key']",
];

export function createLogger(level: string): Logger {
  return pino({
    level,
    redact: { paths: REDACT_PATHS, censor: "[redacted]" },
    base: { service: "x402-facilitator" },
    // URLs carry provider keys: every field and message keeps the host only.
    formatters: { log: (record) => redactUrlsDeep(record) as Record<string, unknown> },
    hooks: {
      logMethod(args, method) {
        method.apply(
          this,
          args.map((a) => (typeof a === "string" ? redactUrls(a) : a)) as Parameters<typeof method>,
        );
      },
    },
  });
}

export type { Logger };
