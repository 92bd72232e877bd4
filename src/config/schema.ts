/**
 * The environment's shape: which service variables exist, their ranges and
 * their defaults, as one zod object (./load.ts turns the parsed result into a
 * Config). Defaults that belong to a feature (the plans' prices) are not
 * here: the schema leaves them unset, and the feature that owns them fills
 * them in (features/plans DEFAULT_PLAN_PRICES), so this floor imports no feature.
 */
import { z } from "zod";
import { intVar } from "../lib/envVars.js";
import { microUsdOf } from "../lib/usd.js";

/**
 * A devnet's billing payments go here unless BILLING_PAY_TO says otherwise:
 * an address nobody holds the key of, so what arrives is easy to count.
 */
export const DEVNET_BILLING_PAY_TO = "0x0000000000000000000000000000000000b111ed";

/** ERC-8021 Schema 2 code, as `@x402/extensions/builder-code` accepts it. */
const BUILDER_CODE_FORMAT = /^[a-z0-9_]{1,32}$/;

export const EnvSchema = z.object({
  FACILITATOR_MODE: z.enum(["devnet", "production"]).optional(),
  HOST: z.string().min(1).optional(),
  PORT: intVar("PORT", 0, 65535, 4020),
  LOG_LEVEL: z.enum(["trace", "debug", "info", "warn", "error", "fatal", "silent"]).default("info"),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, "DATABASE_URL must start with postgres:// or postgresql://")
    .optional(),
  DATA_DIR: z.string().min(1).default(".data"),
  BODY_LIMIT_BYTES: intVar("BODY_LIMIT_BYTES", 1024, 10 * 1024 * 1024, 64 * 1024),
  // Official clients give up after 90 s; answering well before that lets a
  // pending settlement be reported with its hash instead of a client timeout.
  SETTLE_TIMEOUT_MS: intVar("SETTLE_TIMEOUT_MS", 1000, 85_000, 60_000),
  BUILDER_CODE: z
    .string()
    .regex(BUILDER_CODE_FORMAT, "BUILDER_CODE must be 1-32 characters of a-z, 0-9 and _")
    .optional(),
  BUILDER_SERVICE_CODE: z
    .string()
    .regex(BUILDER_CODE_FORMAT, "BUILDER_SERVICE_CODE must be 1-32 characters of a-z, 0-9 and _")
    .optional(),
  RECONCILE_AFTER_MS: z.string().optional(),
  SHUTDOWN_DRAIN_MS: z.string().optional(),
  TRUST_PROXY: z.string().default("false"),
  RATE_LIMIT_MAX: intVar("RATE_LIMIT_MAX", 0, 10_000_000, 10_000),
  CONFIDENTIAL_UNITS_PER_SETTLEMENT: intVar("CONFIDENTIAL_UNITS_PER_SETTLEMENT", 1, 100, 2),
  CONFIDENTIAL_BATCH_LEASE_MS: intVar("CONFIDENTIAL_BATCH_LEASE_MS", 10_000, 86_400_000, 900_000),
  RATE_LIMIT_WINDOW_MS: intVar("RATE_LIMIT_WINDOW_MS", 100, 3_600_000, 10_000),
  RATE_LIMIT_PER_KEY: z.enum(["true", "false", ""]).optional(),
  METRICS_PUBLIC: z.enum(["true", "false", ""]).optional(),
  // Requests per account a minute (all its keys together), by plan: a free key can try everything (each
  // paid request is a /verify and a /settle), a max key carries a busy
  // marketplace. Operators raise them for customers who need more.
  RATE_LIMIT_PLAN_WINDOW_MS: intVar("RATE_LIMIT_PLAN_WINDOW_MS", 1000, 3_600_000, 60_000),
  RATE_LIMIT_PLAN_FREE: intVar("RATE_LIMIT_PLAN_FREE", 0, 100_000_000, 120),
  RATE_LIMIT_PLAN_STARTER: intVar("RATE_LIMIT_PLAN_STARTER", 0, 100_000_000, 1_200),
  RATE_LIMIT_PLAN_PRO: intVar("RATE_LIMIT_PLAN_PRO", 0, 100_000_000, 6_000),
  RATE_LIMIT_PLAN_MAX: intVar("RATE_LIMIT_PLAN_MAX", 0, 100_000_000, 60_000),
  RATE_LIMIT_PLAN_PAYG: intVar("RATE_LIMIT_PLAN_PAYG", 0, 100_000_000, 6_000),
  CORS_ORIGINS: z.string().default("*"),
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, "REDIS_URL must start with redis:// or rediss://")
    .optional(),
  METER_SETTLEMENTS: z.enum(["true", "false", ""]).optional(),
  PLAN_STARTER_LIMIT: intVar("PLAN_STARTER_LIMIT", 0, 2_000_000_000, 10_000),
  PLAN_PRO_LIMIT: intVar("PLAN_PRO_LIMIT", 0, 2_000_000_000, 100_000),
  PLAN_MAX_LIMIT: intVar("PLAN_MAX_LIMIT", 0, 2_000_000_000, 1_000_000),
  // An honest merchant's settles fail before anything is sent (a balance, a
  // signature) and never count; these are failures that cost us gas.
  FAILED_SETTLES_PER_HOUR_FREE: intVar("FAILED_SETTLES_PER_HOUR_FREE", 1, 1_000_000, 20),
  FAILED_SETTLES_PER_HOUR_PAID: intVar("FAILED_SETTLES_PER_HOUR_PAID", 1, 1_000_000, 500),
  // Each funding is one approve's gas (bounded in the EVM family), so a
  // count bounds the native tokens an account's payers can be given.
  SPONSORED_FUNDINGS_PER_DAY: intVar("SPONSORED_FUNDINGS_PER_DAY", 0, 1_000_000, 100),
  PAYER_FAILURE_COOLING_SECONDS: intVar("PAYER_FAILURE_COOLING_SECONDS", 0, 30 * 86_400, 3_600),
  PLAN_STARTER_PRICE_USD: optionalUsdVar("PLAN_STARTER_PRICE_USD"),
  PLAN_PRO_PRICE_USD: optionalUsdVar("PLAN_PRO_PRICE_USD"),
  PLAN_MAX_PRICE_USD: optionalUsdVar("PLAN_MAX_PRICE_USD"),
  BILLING_NETWORKS: z.string().optional(),
  BILLING_PAY_TO: z
    .string()
    .regex(/^0x[0-9a-fA-F]{40}$/, "BILLING_PAY_TO must be a 0x address (40 hex digits)")
    .optional(),
  BILLING_TOP_UP_MIN_USD: usdVar("BILLING_TOP_UP_MIN_USD", 1_000_000),
  BILLING_PAYG_GRACE_USD: usdVar("BILLING_PAYG_GRACE_USD", 0),
  WEBHOOK_ALLOW_PRIVATE_TARGETS: z.enum(["true", "false", ""]).default("false"),
  // Live API keys an account may hold when it creates one from the dashboard
  // (the operator's `npm run keys` is not limited). Rate limits count per
  // key, so without a cap a free account would multiply its own limit.
  API_KEYS_PER_ACCOUNT: intVar("API_KEYS_PER_ACCOUNT", 1, 10_000, 20),
  // Every network, as production lists them: a fresh `npm start` serves what
  // `GET /supported` lists in production. DEVNET_NETWORKS narrows it.
  DEVNET_NETWORKS: z.string().default("all"),
  DEVNET_BLOCK_TIME: z
    .string()
    .default("1")
    .refine((v) => Number.isFinite(Number(v)) && Number(v) >= 0 && Number(v) <= 60, {
      message: "DEVNET_BLOCK_TIME must be seconds from 0 to 60 (0 = one block per transaction)",
    })
    .transform(Number),
  DEVNET_FILE: z.string().default(".devnet/devnet.json"),
  EXTRA_ASSETS: z.string().optional(),
});

/**
 * A USD amount (`5`, `49.90`, `0.002`: at most 6 decimals, USDC's) as
 * micro-USD; undefined when unset or blank.
 */
function optionalUsdVar(name: string) {
  return z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v.trim() === "") return undefined;
      const microUsd = microUsdOf(v);
      if (microUsd === undefined) {
        ctx.addIssue({
          code: "custom",
          message: `${name} must be an amount in USD with at most 6 decimals (e.g. 49 or 0.002), got "${v}"`,
        });
        return z.NEVER;
      }
      return microUsd;
    });
}

/** The same, with the fallback in micro-USD when unset or blank. */
function usdVar(name: string, fallbackMicroUsd: number) {
  return optionalUsdVar(name).transform((v) => v ?? fallbackMicroUsd);
}
