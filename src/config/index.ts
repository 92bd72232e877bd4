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
import { intVar, optionalMs, parseEnv, readSecret, type ConfigVariable } from "../lib/envVars.js";
import { microUsdOf } from "../lib/usd.js";
import { CONFIDENTIAL_NETWORK } from "../chains/confidentialPort.js";
import type { AssetDescription, NetworkDescription } from "../chains/ports.js";
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
import { DEFAULT_PLAN_PRICES } from "../features/plans/plans.js";

export { ConfigError };
export type { AuthProviderConfig } from "./auth.js";

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
   * Assets the operator settles beside the ones the families list
   * (`EXTRA_ASSETS`); every other asset is refused with `unsupported_asset`.
   */
  readonly extraAssets: readonly NetworkDescription[];
  /**
   * ERC-8021 attribution this service adds to every settlement it sends: its
   * own builder code (`w`) and service code (`s`). Absent: none of its own;
   * codes from resource servers and clients are still stamped.
   */
  readonly builderCode: string | undefined;
  readonly builderServiceCode: string | undefined;
  /** A `pending` settlement older than this is reconciled against the chain. */
  readonly reconcileAfterMs: number;
  /**
   * How long a payer whose own payment failed on-chain is refused, on every
   * account (`payer_failed_onchain_recently`); 0: never.
   */
  readonly payerFailureCoolingMs: number;
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
    /** Settlements failing on-chain per network per hour before an account is held off. */
    readonly failuresPerHour: { readonly free: number; readonly paid: number };
    /** Monthly prices of the paid plans, in micro-USD. */
    readonly prices: { readonly starter: number; readonly pro: number; readonly max: number };
    /** How far below zero a pay-as-you-go balance may run before suspension, in micro-USD. */
    readonly paygGraceMicroUsd: number;
  };
  /**
   * Plans paid for in x402 (features/billing): the networks a payment is
   * offered on (exact USDC), where it goes, the smallest top-up. No networks:
   * nothing is sold, and only the operator changes plans.
   */
  readonly billing: {
    readonly networks: readonly string[];
    readonly payTo: string | undefined;
    readonly topUpMinMicroUsd: number;
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
  // An honest merchant's settles fail before anything is sent (a balance, a
  // signature) and never count; these are failures that cost us gas.
  FAILED_SETTLES_PER_HOUR_FREE: intVar("FAILED_SETTLES_PER_HOUR_FREE", 1, 1_000_000, 20),
  FAILED_SETTLES_PER_HOUR_PAID: intVar("FAILED_SETTLES_PER_HOUR_PAID", 1, 1_000_000, 500),
  PAYER_FAILURE_COOLING_SECONDS: intVar("PAYER_FAILURE_COOLING_SECONDS", 0, 30 * 86_400, 3_600),
  PLAN_STARTER_PRICE_USD: usdVar("PLAN_STARTER_PRICE_USD", DEFAULT_PLAN_PRICES.starter),
  PLAN_PRO_PRICE_USD: usdVar("PLAN_PRO_PRICE_USD", DEFAULT_PLAN_PRICES.pro),
  PLAN_MAX_PRICE_USD: usdVar("PLAN_MAX_PRICE_USD", DEFAULT_PLAN_PRICES.max),
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
 * micro-USD, or the fallback when unset or blank.
 */
function usdVar(name: string, fallbackMicroUsd: number) {
  return z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v.trim() === "") return fallbackMicroUsd;
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

/**
 * A devnet's billing payments go here unless BILLING_PAY_TO says otherwise:
 * an address nobody holds the key of, so what arrives is easy to count.
 */
export const DEVNET_BILLING_PAY_TO = "0x0000000000000000000000000000000000b111ed";

/**
 * `BILLING_NETWORKS`: EVM networks whose listed asset is USDC, where a plan
 * or a top-up is paid with `exact` (an EIP-3009 authorization nobody pays
 * gas for but us). The devnet offers its first EVM network unless told.
 */
function parseBillingNetworks(
  raw: string | undefined,
  mode: "devnet" | "production",
  devnetNetworks: readonly string[],
): string[] {
  const known = new Map(describeNetworks().map((n) => [n.id, n]));
  const ids =
    raw === undefined
      ? mode === "devnet"
        ? devnetNetworks.filter((id) => id.startsWith("eip155:")).slice(0, 1)
        : []
      : raw
          .split(",")
          .map((s) => s.trim())
          .filter(Boolean);
  for (const id of ids) {
    const network = known.get(id);
    if (!network || !id.startsWith("eip155:") || !network.assets.some((a) => a.symbol === "USDC")) {
      throw new ConfigError(
        `BILLING_NETWORKS: "${id}" is not an EVM network that settles USDC (e.g. eip155:8453)`,
      );
    }
    if (mode === "devnet" && !devnetNetworks.includes(id)) {
      throw new ConfigError(`BILLING_NETWORKS: "${id}" is not one of DEVNET_NETWORKS`);
    }
  }
  return [...new Set(ids)];
}

/**
 * `EXTRA_ASSETS`: entries `network,asset,symbol,decimals`, separated by `;`
 * or new lines, e.g. `eip155:8453,0x60a3…,EURC,6`. Each names a token the
 * operator vouches for: its code will run inside our signers' transactions.
 */
function parseExtraAssets(raw: string | undefined): NetworkDescription[] {
  const known = new Map(describeNetworks().map((n) => [n.id, n]));
  const byNetwork = new Map<string, NetworkDescription & { assets: AssetDescription[] }>();
  const entries = (raw ?? "")
    .split(/[;\n]/)
    .map((e) => e.trim())
    .filter(Boolean);
  entries.forEach((entry, i) => {
    const [network, asset, symbol, decimals, ...rest] = entry.split(",").map((p) => p.trim());
    const base = network ? known.get(network) : undefined;
    if (!base) {
      throw new ConfigError(
        `EXTRA_ASSETS entry #${i + 1}: "${network ?? ""}" is not a supported network (write network,asset,symbol,decimals)`,
      );
    }
    if (
      rest.length > 0 ||
      !asset ||
      !/^[\x21-\x7e]{1,256}$/.test(asset) ||
      !symbol ||
      !/^[A-Za-z0-9.$-]{1,16}$/.test(symbol) ||
      !/^\d{1,2}$/.test(decimals ?? "")
    ) {
      throw new ConfigError(
        `EXTRA_ASSETS entry #${i + 1} must read network,asset,symbol,decimals (e.g. eip155:8453,0x…,EURC,6)`,
      );
    }
    const listed = byNetwork.get(network!) ?? {
      id: base.id,
      name: base.name,
      schemes: base.schemes,
      assets: [],
      ...(base.explorerTx ? { explorerTx: base.explorerTx } : {}),
    };
    listed.assets.push({ id: asset, symbol, decimals: Number(decimals) });
    byNetwork.set(network!, listed);
  });
  return [...byNetwork.values()];
}

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

  const billingNetworks = parseBillingNetworks(e.BILLING_NETWORKS, mode, devnetNetworks);
  const billingPayTo = e.BILLING_PAY_TO ?? (mode === "devnet" ? DEVNET_BILLING_PAY_TO : undefined);
  if (billingNetworks.length > 0 && !billingPayTo) {
    throw new ConfigError(
      "BILLING_NETWORKS is set but BILLING_PAY_TO is not: name the address plan payments go to",
    );
  }

  return {
    mode,
    billing: {
      networks: billingNetworks,
      payTo: billingPayTo?.toLowerCase(),
      topUpMinMicroUsd: Math.max(1, e.BILLING_TOP_UP_MIN_USD),
    },
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
      failuresPerHour: {
        free: e.FAILED_SETTLES_PER_HOUR_FREE,
        paid: e.FAILED_SETTLES_PER_HOUR_PAID,
      },
      prices: {
        starter: e.PLAN_STARTER_PRICE_USD,
        pro: e.PLAN_PRO_PRICE_USD,
        max: e.PLAN_MAX_PRICE_USD,
      },
      paygGraceMicroUsd: e.BILLING_PAYG_GRACE_USD,
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
    extraAssets: parseExtraAssets(e.EXTRA_ASSETS),
    builderCode: e.BUILDER_CODE || undefined,
    builderServiceCode: e.BUILDER_SERVICE_CODE || undefined,
    reconcileAfterMs,
    payerFailureCoolingMs: e.PAYER_FAILURE_COOLING_SECONDS * 1000,
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

/**
 * The variables this file reads, by the section of docs/configuration.md
 * that lists them (`npm run docs:config` writes it; a test fails when a
 * variable read here is missing). Sign-in's are in ./auth.ts, the
 * confidential vault's in ./confidential.ts, each family's in its own
 * src/chains/<family>/config.ts.
 */
export const VARIABLES: {
  readonly service: readonly ConfigVariable[];
  readonly http: readonly ConfigVariable[];
  readonly storage: readonly ConfigVariable[];
  readonly plans: readonly ConfigVariable[];
  readonly webhooks: readonly ConfigVariable[];
  readonly confidential: readonly ConfigVariable[];
} = {
  service: [
    {
      name: "FACILITATOR_MODE",
      default: "inferred",
      description:
        "`devnet` or `production`. Inferred: production as soon as any family's RPC URL or key is set, devnet otherwise. Production with a missing piece is an error, never a fall-back to devnet; `devnet` with chain configuration set is an error too.",
    },
    {
      name: "HOST",
      default: "`127.0.0.1` (devnet), `0.0.0.0` (production)",
      description: "The address to listen on.",
    },
    { name: "PORT", default: "`4020`", description: "The port to listen on (0 to 65535)." },
    {
      name: "LOG_LEVEL",
      default: "`info`",
      description:
        "pino level: `trace`, `debug`, `info`, `warn`, `error`, `fatal` or `silent`. Logs keep only the host of any URL.",
    },
    {
      name: "SETTLE_TIMEOUT_MS",
      default: "`60000`",
      description:
        "How long `/settle` waits for the chain before answering `settlement_pending` with the transaction hash (1000 to 85000). Keep it below the official client's 90 s.",
    },
    {
      name: "RECONCILE_AFTER_MS",
      default: "`SETTLE_TIMEOUT_MS` + 30 s",
      description:
        "A settlement still `pending` after this long (its process died, or the answer was lost) is decided from the chain by the reconciler.",
    },
    {
      name: "SHUTDOWN_DRAIN_MS",
      default: "`SETTLE_TIMEOUT_MS` + 5 s",
      description:
        "On `SIGTERM`, how long in-flight requests may finish before their connections are cut (their settlements stay `pending` for the reconciler); at least 1000. The process exits 0 after closing the database and handing back its signer leases.",
    },
    {
      name: "EXTRA_ASSETS",
      description:
        "Assets settled beside the ones each family lists (USDC, USDG, XRP and RLUSD): entries `network,asset,symbol,decimals` separated by `;`, e.g. `eip155:8453,0x…,EURC,6`. Every other asset is refused with `unsupported_asset` before any chain call: a token's code runs inside our signers' transactions, so list only tokens you vouch for.",
    },
    {
      name: "BUILDER_CODE",
      description:
        "ERC-8021 attribution this service adds to every EVM settlement: its builder code (`w`), 1–32 characters of `a-z`, `0-9`, `_`. Codes from resource servers (`a`) and clients (`s`) are stamped either way.",
    },
    {
      name: "BUILDER_SERVICE_CODE",
      description:
        "The service code (`s`) this service adds beside `BUILDER_CODE`, in the same format.",
    },
    {
      name: "DEVNET_NETWORKS",
      default: "`all`",
      description:
        "Devnet mode: the networks to run locally (`all`: every network of every family), or a comma-separated list.",
      example: "DEVNET_NETWORKS=eip155:8453,near:mainnet",
    },
    {
      name: "DEVNET_BLOCK_TIME",
      default: "`1`",
      description:
        "Devnet mode: seconds per block (0 to 60); `0` mines one block per transaction. The EVM networks' receipt watching and fee quotes keep to it (see `EVM_BLOCK_TIME_MS_<chainId>`).",
    },
    {
      name: "DEVNET_FILE",
      default: "`.devnet/devnet.json`",
      description:
        "Devnet mode: where the devnet description (RPC URLs, funded payer keys, the API key) is written.",
    },
  ],
  http: [
    {
      name: "BODY_LIMIT_BYTES",
      default: "`65536`",
      description:
        "Largest accepted request body (1024 to 10485760); a larger one is 413 `payload_too_large`.",
    },
    {
      name: "TRUST_PROXY",
      default: "`false`",
      description:
        "Behind a proxy or CDN: `true`, a hop count, or the proxies' addresses/CIDRs (comma-separated). Only then is `X-Forwarded-For` used for the client IP; without it every client shares the proxy's per-IP budget.",
    },
    {
      name: "CORS_ORIGINS",
      default: "`*`",
      description:
        "Browser origins allowed, comma-separated. Payment headers (`PAYMENT-SIGNATURE`, `X-PAYMENT`) are allowed; `PAYMENT-REQUIRED`, `PAYMENT-RESPONSE`, `X-PAYMENT-RESPONSE` and `EXTENSION-RESPONSES` are exposed.",
    },
    {
      name: "METRICS_TOKEN",
      description:
        "A bearer token (16 to 512 printable characters) that `GET /metrics` then requires as `Authorization: Bearer <token>` (401 without it, compared in constant time). Unset: `/metrics` is open, as Prometheus scrapers usually expect inside a private network.",
      secret: true,
    },
    {
      name: "API_KEYS_PER_ACCOUNT",
      default: "`20`",
      description:
        "How many live API keys one account may hold (revoked keys do not count); the next is refused 409 `key_limit_reached`. Every key has its own rate limit, so keys must not multiply. The operator's CLI is not limited.",
    },
    {
      name: "RATE_LIMIT_MAX",
      default: "`10000`",
      description:
        "The per-IP limit: requests per client IP per window on the routes that take no API key, plus every refused key (brute-force guard). A valid key never counts against its IP. Over it: 429 with `Retry-After`. `0` disables.",
    },
    {
      name: "RATE_LIMIT_WINDOW_MS",
      default: "`10000`",
      description: "The per-IP window (100 to 3600000).",
    },
    {
      name: "RATE_LIMIT_PER_KEY",
      default: "`true` (production), `false` (devnet)",
      description:
        "Limit each API key by its account's plan (see [Plans and keys](plans-and-keys.md#rate-limits)). Setting a `RATE_LIMIT_PLAN_*` variable while this is off is a configuration error.",
    },
    {
      name: "RATE_LIMIT_PLAN_WINDOW_MS",
      default: "`60000`",
      description: "The per-key window (1000 to 3600000: 1 s to 1 h).",
    },
    {
      name: "RATE_LIMIT_PLAN_FREE",
      default: "`120`",
      description:
        "Requests per API key per window on the `free` plan. `0`: no limit for the plan. Over it: 429 with `Retry-After`, the plan and the upgrade path.",
    },
    {
      name: "RATE_LIMIT_PLAN_STARTER",
      default: "`1200`",
      description: "The same for the `starter` plan.",
    },
    { name: "RATE_LIMIT_PLAN_PRO", default: "`6000`", description: "The same for the `pro` plan." },
    {
      name: "RATE_LIMIT_PLAN_MAX",
      default: "`60000`",
      description: "The same for the `max` plan.",
    },
    {
      name: "RATE_LIMIT_PLAN_PAYG",
      default: "`6000`",
      description: "The same for the `payg` plan.",
    },
  ],
  storage: [
    {
      name: "DATABASE_URL",
      description:
        "A PostgreSQL server (`postgres://` or `postgresql://`). Without it, the embedded PGlite database in `DATA_DIR/pglite`, which is single-process: replicas need a server.",
      example: "DATABASE_URL=postgres://facilitator@db/facilitator",
    },
    {
      name: "DATA_DIR",
      default: "`.data`",
      description:
        "Where the embedded database lives, and in devnet mode the devnet's chains (`devnet-chains/`), so both survive a restart together. Delete it to start over.",
    },
    {
      name: "REDIS_URL",
      description:
        "`redis://` or `rediss://`: rate-limit counters (per key and per IP) shared by every replica. Without it each process counts alone. Unreachable: requests are served uncounted.",
    },
  ],
  plans: [
    {
      name: "METER_SETTLEMENTS",
      default: "`true` (production), `false` (devnet)",
      description:
        "Enforce and count the monthly quotas (`true`/`false`). Devnet mode's chains are local, so it meters nothing unless told.",
    },
    {
      name: "PLAN_STARTER_LIMIT",
      default: "`10000`",
      description: "Settlements a month on the `starter` plan.",
    },
    {
      name: "PLAN_PRO_LIMIT",
      default: "`100000`",
      description: "Settlements a month on the `pro` plan.",
    },
    {
      name: "PLAN_MAX_LIMIT",
      default: "`1000000`",
      description: "Settlements a month on the `max` plan.",
    },
    {
      name: "FAILED_SETTLES_PER_HOUR_FREE",
      default: "`20`",
      description:
        "How many of a free account's settlements on one network may fail on-chain (after something was sent, so at our gas cost) in an hour; past it, its settles on that network answer 429 `too_many_failed_settlements` with `Retry-After` until the hour has passed. Failures found before sending never count.",
    },
    {
      name: "FAILED_SETTLES_PER_HOUR_PAID",
      default: "`500`",
      description: "The same limit for accounts on a paid plan.",
    },
    {
      name: "PAYER_FAILURE_COOLING_SECONDS",
      default: "`3600`",
      description:
        "How long a payer whose own payment failed on-chain (its wallet's code, or its own move of the funds or the nonce, at our gas cost) is refused before anything is sent, on every account: the settle answers `payer_failed_onchain_recently`. Such failures do not count against the settling account's failure limit. `0` turns the cooling off.",
    },
    {
      name: "PLAN_STARTER_PRICE_USD",
      default: "`5`",
      description:
        "What 30 days of the `starter` plan cost, in USD (at most 6 decimals), paid in USDC with x402 (see [Plans and keys](plans-and-keys.md#paying-for-a-plan)).",
    },
    {
      name: "PLAN_PRO_PRICE_USD",
      default: "`49`",
      description: "The same for the `pro` plan.",
    },
    {
      name: "PLAN_MAX_PRICE_USD",
      default: "`399`",
      description: "The same for the `max` plan.",
    },
    {
      name: "BILLING_NETWORKS",
      default: "the first EVM network (devnet), none (production)",
      description:
        "Comma-separated EVM networks on which plans and pay-as-you-go top-ups are sold: the upgrade path answers 402 with `PAYMENT-REQUIRED` offering `exact` USDC on each, settled by this service itself and recorded under its billing account. Each must be served. Empty: nothing is sold, and only the operator changes plans (`npm run keys -- accounts plan`).",
      example: "BILLING_NETWORKS=eip155:8453,eip155:10",
    },
    {
      name: "BILLING_PAY_TO",
      default: "`" + DEVNET_BILLING_PAY_TO + "` (devnet), none (production)",
      description:
        "The address plan payments and top-ups are paid to (the operator's treasury); required with `BILLING_NETWORKS`.",
    },
    {
      name: "BILLING_TOP_UP_MIN_USD",
      default: "`1`",
      description: "The smallest pay-as-you-go top-up, in USD.",
    },
    {
      name: "BILLING_PAYG_GRACE_USD",
      default: "`0`",
      description:
        "How far below zero a pay-as-you-go balance may run (in USD) before the account is suspended; `0` suspends at the first charge the balance cannot cover. A top-up that brings the balance back within it lifts the suspension at once.",
    },
  ],
  webhooks: [
    {
      name: "WEBHOOK_ALLOW_PRIVATE_TARGETS",
      default: "`false`",
      description:
        "`true` lets webhook endpoints be private, loopback, link-local or unique-local addresses (SSRF guard off). For local development and tests only.",
    },
  ],
  confidential: [
    {
      name: "CONFIDENTIAL_UNITS_PER_SETTLEMENT",
      default: "`2`",
      description:
        "Quota units one confidential settlement costs (1 to 100): its tier fee, shown in the dashboard before enabling.",
    },
    {
      name: "CONFIDENTIAL_BATCH_LEASE_MS",
      default: "`900000`",
      description:
        "How long a replica holds the confidential daily batch before another may resume it (10000 to 86400000).",
    },
  ],
};
