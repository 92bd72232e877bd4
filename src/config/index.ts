/**
 * Configuration: the only module that reads `process.env`.
 *
 * Everything is validated once at boot. A bad value stops the process with a
 * message that names the variable. Secrets (private keys) may be given inline
 * in an env var or, better, as a file path in the matching `*_FILE` variable.
 *
 * Mode: with no chain configuration at all the service runs in **devnet**
 * mode (local anvil chains, embedded database). As soon as any RPC URL or
 * signer key is present it runs in **production** mode, and a missing piece is
 * an error, never a silent fall-back to devnet.
 */
import { ConfigError } from "../lib/configError.js";
import { intVar, optionalMs, parseEnv, readSecret } from "../lib/envVars.js";
import { CONFIDENTIAL_NETWORK } from "../chains/confidentialPort.js";
import {
  FAMILIES,
  NAMESPACES,
  describeNetworks,
  rpcUrlOf,
  type ChainSetups,
  type FamilySettings,
} from "../chains/index.js";
import { parseAuthConfig, type AuthConfig } from "./auth.js";
import { parseConfidentialConfig, type ConfidentialConfig } from "./confidential.js";
import { z } from "zod";

export { ConfigError };
export type { AuthConfig, AuthProviderConfig } from "./auth.js";

export interface Config {
  readonly mode: "devnet" | "production";
  readonly host: string;
  readonly port: number;
  readonly logLevel: string;
  /** PostgreSQL server URL; when absent, PGlite in `dataDir`. */
  readonly databaseUrl: string | undefined;
  readonly dataDir: string;
  readonly bodyLimitBytes: number;
  /** How long /settle waits for a receipt before answering `settlement_pending`. */
  readonly settleTimeoutMs: number;
  /**
   * The chains to serve in production, keyed by CAIP-2 namespace (each
   * family reads its own variables: src/chains/<family>/config.ts). Empty in
   * devnet mode: the devnet supplies them.
   */
  readonly chains: ChainSetups;
  /** Each family's limits and switches, keyed by CAIP-2 namespace, with defaults. */
  readonly families: FamilySettings;
  /**
   * ERC-8021 attribution this service adds to every settlement it sends: its
   * own builder code (`w`) and service code (`s`). Absent: none of its own;
   * codes from resource servers and clients are still stamped.
   */
  readonly builderCode: string | undefined;
  readonly builderServiceCode: string | undefined;
  /** A `pending` settlement older than this is reconciled against the chain. */
  readonly reconcileAfterMs: number;
  /** How long SIGTERM waits for in-flight requests before closing anyway. */
  readonly shutdownDrainMs: number;
  readonly http: {
    /** Fastify trustProxy: false, true, a hop count, or addresses/CIDRs. */
    readonly trustProxy: boolean | number | string;
    /**
     * Requests per client IP per window on the routes that take no API key,
     * plus every request whose key is refused; 0 disables this limit.
     * Requests with a valid key never count against their IP.
     */
    readonly rateLimitMax: number;
    readonly rateLimitWindowMs: number;
    /**
     * Requests per API key per window, by the account's plan (0: no limit
     * for that plan). Undefined: keys are not limited (the devnet default).
     */
    readonly keyRateLimits:
      | {
          readonly windowMs: number;
          readonly perPlan: {
            readonly free: number;
            readonly starter: number;
            readonly pro: number;
            readonly max: number;
            readonly payg: number;
          };
        }
      | undefined;
    /** Allowed browser origins, or "*". */
    readonly corsOrigins: "*" | readonly string[];
    /** When set, GET /metrics needs `Authorization: Bearer <token>`. */
    readonly metricsToken: string | undefined;
  };
  /** Shared Redis for cross-replica rate limits; absent = in-process limits. */
  readonly redisUrl: string | undefined;
  /** Plans and quotas (features/plans). */
  readonly plans: {
    /** Enforce and count monthly quotas. Default: on in production, off in devnet (local chains). */
    readonly metering: boolean;
    readonly starterLimit: number;
    readonly proLimit: number;
    readonly maxLimit: number;
  };
  readonly webhooks: {
    /** Let webhook endpoints be private, loopback or link-local addresses (SSRF guard off). */
    readonly allowPrivateTargets: boolean;
  };
  /** Live API keys an account may create from the dashboard (rate limits count per key). */
  readonly apiKeysPerAccount: number;
  /** Confidential settlement's service-side settings (the contract's are in config/confidential.ts). */
  readonly confidential: {
    /** Quota units a confidential settlement costs: its tier fee, shown before enabling. */
    readonly unitsPerSettlement: number;
    /** How long a replica holds the daily batch before another may resume it. */
    readonly batchLeaseMs: number;
  };
  /** Dashboard sign-in, sessions and the built web app (config/auth.ts). */
  readonly auth: AuthConfig;
  /**
   * Confidential settlement's vault, keys and fhEVM (src/config/confidential.ts);
   * undefined when not configured. Devnet mode takes these from the devnet.
   */
  readonly confidentialVault: ConfidentialConfig | undefined;
  readonly devnet: {
    readonly networks: readonly string[];
    readonly blockTimeSeconds: number;
    readonly file: string;
  };
}

/** ERC-8021 Schema 2 code, as `@x402/extensions/builder-code` accepts it. */
const BUILDER_CODE_FORMAT = /^[a-z0-9_]{1,32}$/;

const EnvSchema = z.object({
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
  // Requests per key a minute, by plan: a free key can try everything (each
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
});

/** METRICS_TOKEN (or _FILE): a bearer token for GET /metrics, long enough not to be guessed. */
function parseMetricsToken(raw: string | undefined): string | undefined {
  const token = raw?.trim();
  if (!token) return undefined;
  if (!/^[\x21-\x7e]{16,512}$/.test(token))
    throw new ConfigError("METRICS_TOKEN must be 16 to 512 printable characters without spaces");
  return token;
}

/** The per-key (per plan) rate-limit settings, which need per-key limits on. */
const PLAN_RATE_LIMIT_VARS = [
  "RATE_LIMIT_PLAN_WINDOW_MS",
  "RATE_LIMIT_PLAN_FREE",
  "RATE_LIMIT_PLAN_STARTER",
  "RATE_LIMIT_PLAN_PRO",
  "RATE_LIMIT_PLAN_MAX",
  "RATE_LIMIT_PLAN_PAYG",
] as const;

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const e = parseEnv(EnvSchema, env);

  const hasChainConfig = NAMESPACES.some((ns) => FAMILIES[ns].config.present(env));
  const mode = e.FACILITATOR_MODE ?? (hasChainConfig ? "production" : "devnet");
  if (mode === "devnet" && hasChainConfig) {
    const set = NAMESPACES.filter((ns) => FAMILIES[ns].config.present(env))
      .map((ns) => FAMILIES[ns].label)
      .join(", ");
    throw new ConfigError(
      `FACILITATOR_MODE=devnet but chain configuration is set (${set}): remove one of them`,
    );
  }
  if (mode === "production" && !hasChainConfig) {
    throw new ConfigError(
      `production mode needs at least one network: set ${NAMESPACES.map((ns) => FAMILIES[ns].config.hint).join(", or ")}`,
    );
  }
  // Each family parses its own variables: settings always, what to serve
  // only when configured.
  const parsedFamilies = Object.fromEntries(
    NAMESPACES.map((ns) => [ns, FAMILIES[ns].config.parse(env, mode)]),
  ) as { [N in keyof FamilySettings]: { setup?: ChainSetups[N]; settings: FamilySettings[N] } };
  const chains: ChainSetups = {};
  const families = {} as Record<string, unknown>;
  for (const ns of NAMESPACES) {
    const { setup, settings } = parsedFamilies[ns];
    if (setup && mode === "production") (chains as Record<string, unknown>)[ns] = setup;
    families[ns] = settings;
  }

  const confidential = parseConfidentialConfig(env, (name) => readSecret(env, name));
  if (confidential && mode === "production" && !rpcUrlOf(chains, CONFIDENTIAL_NETWORK)) {
    throw new ConfigError(
      `confidential settlement runs on ${CONFIDENTIAL_NETWORK}: serve that network as well`,
    );
  }
  if (confidential && mode === "devnet") {
    throw new ConfigError(
      "CONFIDENTIAL_* variables are for production; devnet mode places its own vault: remove them",
    );
  }

  // Every network of every family, in the table's order.
  const allNetworkIds = describeNetworks().map((n) => n.id);
  const devnetNetworks =
    e.DEVNET_NETWORKS.trim() === "all"
      ? // Every network: the devnet has a local chain for each family and a
        // contract for each EVM transfer method (devnet/index.ts).
        allNetworkIds
      : e.DEVNET_NETWORKS.split(",")
          .map((s) => s.trim())
          .filter(Boolean);
  for (const id of devnetNetworks) {
    if (!allNetworkIds.includes(id)) {
      throw new ConfigError(
        `DEVNET_NETWORKS: "${id}" is not a supported network (supported: ${allNetworkIds.join(", ")}, or "all")`,
      );
    }
  }

  const reconcileAfterMs =
    optionalMs("RECONCILE_AFTER_MS", e.RECONCILE_AFTER_MS, 0) ?? e.SETTLE_TIMEOUT_MS + 30_000;

  // Long enough for a settle that just started to reach its own time budget.
  const shutdownDrainMs =
    optionalMs("SHUTDOWN_DRAIN_MS", e.SHUTDOWN_DRAIN_MS, 1000) ?? e.SETTLE_TIMEOUT_MS + 5_000;

  const trustProxy = (() => {
    const v = e.TRUST_PROXY.trim();
    if (v === "false" || v === "") return false;
    if (v === "true") return true;
    if (/^\d+$/.test(v)) return Number(v);
    return v; // addresses or CIDRs, comma-separated, as Fastify accepts
  })();
  // Per-key limits fit a hosted service; the devnet (a developer's own
  // machine and load tests) runs without them unless asked, as with metering.
  const perKey =
    e.RATE_LIMIT_PER_KEY === "true" || (e.RATE_LIMIT_PER_KEY !== "false" && mode === "production");
  const planLimitVars = PLAN_RATE_LIMIT_VARS.filter((name) => (env[name] ?? "").trim() !== "");
  if (!perKey && planLimitVars.length > 0) {
    throw new ConfigError(
      `${planLimitVars.join(", ")} ${planLimitVars.length === 1 ? "has" : "have"} no effect while per-key rate limits are off (${
        e.RATE_LIMIT_PER_KEY === "false" ? "RATE_LIMIT_PER_KEY=false" : "the devnet default"
      }): set RATE_LIMIT_PER_KEY=true, or remove ${planLimitVars.length === 1 ? "it" : "them"}`,
    );
  }
  const keyRateLimits = perKey
    ? {
        windowMs: e.RATE_LIMIT_PLAN_WINDOW_MS,
        perPlan: {
          free: e.RATE_LIMIT_PLAN_FREE,
          starter: e.RATE_LIMIT_PLAN_STARTER,
          pro: e.RATE_LIMIT_PLAN_PRO,
          max: e.RATE_LIMIT_PLAN_MAX,
          payg: e.RATE_LIMIT_PLAN_PAYG,
        },
      }
    : undefined;
  const corsOrigins =
    e.CORS_ORIGINS.trim() === "*"
      ? ("*" as const)
      : e.CORS_ORIGINS.split(",")
          .map((o) => o.trim())
          .filter(Boolean);

  return {
    mode,
    http: {
      trustProxy,
      rateLimitMax: e.RATE_LIMIT_MAX,
      rateLimitWindowMs: e.RATE_LIMIT_WINDOW_MS,
      keyRateLimits,
      corsOrigins,
      metricsToken: parseMetricsToken(readSecret(env, "METRICS_TOKEN")),
    },
    redisUrl: e.REDIS_URL,
    plans: {
      metering:
        e.METER_SETTLEMENTS === "true" ||
        (e.METER_SETTLEMENTS !== "false" && mode === "production"),
      starterLimit: e.PLAN_STARTER_LIMIT,
      proLimit: e.PLAN_PRO_LIMIT,
      maxLimit: e.PLAN_MAX_LIMIT,
    },
    webhooks: { allowPrivateTargets: e.WEBHOOK_ALLOW_PRIVATE_TARGETS === "true" },
    apiKeysPerAccount: e.API_KEYS_PER_ACCOUNT,
    confidential: {
      unitsPerSettlement: e.CONFIDENTIAL_UNITS_PER_SETTLEMENT,
      batchLeaseMs: e.CONFIDENTIAL_BATCH_LEASE_MS,
    },
    auth: parseAuthConfig(env, mode, (name) => readSecret(env, name)),
    confidentialVault: confidential,
    chains,
    families: families as unknown as FamilySettings,
    builderCode: e.BUILDER_CODE || undefined,
    builderServiceCode: e.BUILDER_SERVICE_CODE || undefined,
    reconcileAfterMs,
    shutdownDrainMs,
    host: e.HOST ?? (mode === "devnet" ? "127.0.0.1" : "0.0.0.0"),
    port: e.PORT,
    logLevel: e.LOG_LEVEL,
    databaseUrl: e.DATABASE_URL,
    dataDir: e.DATA_DIR,
    bodyLimitBytes: e.BODY_LIMIT_BYTES,
    settleTimeoutMs: e.SETTLE_TIMEOUT_MS,
    devnet: {
      networks: devnetNetworks,
      blockTimeSeconds: e.DEVNET_BLOCK_TIME,
      file: e.DEVNET_FILE,
    },
  };
}
