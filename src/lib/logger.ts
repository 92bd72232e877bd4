/**
 * The process logger. Redaction is configured here, once, so that no code
 * path can log a private key, an API key or a webhook secret by accident.
 */
import { pino, type Logger } from "pino";

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
  });
}

export type { Logger };
