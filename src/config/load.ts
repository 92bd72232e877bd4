/**
 * Loading the configuration: the only module that reads `process.env`.
 *
 * Everything is validated once at boot. A bad value stops the process with a
 * message that names the variable. Secrets (private keys) may be given inline
 * in an env var or, better, as a file path in the matching `*_FILE` variable.
 *
 * Mode: with no chain configuration at all the service runs in **devnet**
 * mode (local anvil chains, embedded database). As soon as any RPC URL or
 * signer key is present it runs in **production** mode, and a missing piece is
 * an error, never a silent fall-back to devnet.
 *
 * The variables' shape is in ./schema.ts, their documentation in
 * ./variables.ts, the resulting type in ./types.ts.
 */
import { ConfigError } from "../lib/configError.js";
import { optionalMs, parseEnv, readSecret } from "../lib/envVars.js";
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
import { parseAuthConfig } from "./auth.js";
import { parseConfidentialConfig } from "./confidential.js";
import { DEVNET_BILLING_PAY_TO, EnvSchema } from "./schema.js";
import type { Config } from "./types.js";

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
        // contract for each EVM transfer method (devnet/evm/index.ts).
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
      metricsPublic:
        e.METRICS_PUBLIC === "true" || (e.METRICS_PUBLIC !== "false" && mode === "devnet"),
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
      sponsoredFundingsPerDay: e.SPONSORED_FUNDINGS_PER_DAY,
      // Only what the operator set: a spread over the plans' defaults must
      // not meet an undefined.
      prices: {
        ...(e.PLAN_STARTER_PRICE_USD !== undefined ? { starter: e.PLAN_STARTER_PRICE_USD } : {}),
        ...(e.PLAN_PRO_PRICE_USD !== undefined ? { pro: e.PLAN_PRO_PRICE_USD } : {}),
        ...(e.PLAN_MAX_PRICE_USD !== undefined ? { max: e.PLAN_MAX_PRICE_USD } : {}),
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
