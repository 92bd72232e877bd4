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
import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { ConfigError } from "./configError.js";
import { parseSvmConfig, type SvmConfig } from "./svm.js";
import { parseXrplConfig, type XrplConfig } from "./xrpl.js";
import { parseNearConfig, type NearConfig } from "./near.js";
import { SVM_NETWORKS } from "../networks/svm.js";
import { XRPL_NETWORKS } from "../networks/xrpl.js";
import { NEAR_NETWORKS } from "../networks/near.js";
import { parseStarknetConfig, type StarknetConfig } from "./starknet.js";
import { STARKNET_NETWORKS } from "../networks/starknet.js";
import { parseAuthConfig, type AuthConfig } from "./auth.js";
import { parseConfidentialConfig, type ConfidentialConfig } from "./confidential.js";
import { z } from "zod";
import {
  DEVNET_WALLET_FACTORY_ADDRESS,
  EVM_NETWORKS,
  findEvmNetwork,
} from "../networks/registry.js";

export { ConfigError };
export type { AuthConfig, AuthProviderConfig } from "./auth.js";

export interface EvmNetworkConfig {
  /** CAIP-2 id. */
  readonly id: string;
  readonly rpcUrls: readonly string[];
  /** Refuse to settle when maxFeePerGas would exceed this (wei). */
  readonly maxGasPriceWei?: bigint | undefined;
  /** How often the chain makes a block, when the operator says otherwise than the registry. */
  readonly blockTimeMs?: number | undefined;
}

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
   * The chains to serve in production, keyed by family (each family's
   * settings below). Empty in devnet mode: the devnet supplies them.
   */
  readonly chains: {
    readonly evm?: {
      /** Facilitator signer keys (hex). Never logged. */
      readonly privateKeys: readonly `0x${string}`[];
      readonly networks: readonly EvmNetworkConfig[];
    };
    readonly svm?: NonNullable<SvmConfig["setup"]>;
    readonly xrpl?: NonNullable<XrplConfig["setup"]>;
    readonly near?: NonNullable<NearConfig["setup"]>;
    readonly starknet?: NonNullable<StarknetConfig["setup"]>;
  };
  /** Settings of the Solana family (chains/svm). */
  readonly svm: SvmConfig["settings"];
  /** Settings of the XRP Ledger family (chains/xrpl). */
  readonly xrpl: XrplConfig["settings"];
  /** Settings of the NEAR family (chains/near). */
  readonly near: NearConfig["settings"];
  /** Settings of the Starknet family (chains/starknet). */
  readonly starknet: StarknetConfig["settings"];
  /** Settings of the EVM family (chains/evm/createEvm.ts). */
  readonly evm: {
    /** Signers with less native balance than this (wei) leave the rotation. */
    readonly minSignerBalanceWei: bigint;
    /**
     * Factories the service may call to deploy a counterfactual (ERC-6492)
     * payer wallet at settle. Empty: such wallets cannot pay until deployed.
     */
    readonly erc6492AllowedFactories: readonly `0x${string}`[];
    /**
     * Key that co-signs batch-settlement claims and refunds for resource
     * servers that delegate to this service (`receiverAuthorizer`). Absent:
     * not advertised, and servers sign their own.
     */
    readonly batchAuthorizerKey: `0x${string}` | undefined;
    /** Recover EOA signatures inside viem with libsecp256k1 (chains/evm/viemNativeRecovery.ts). */
    readonly nativeRecovery: boolean;
    /** Hash keccak-256 inside viem natively (chains/evm/viemNativeKeccak.ts). */
    readonly nativeKeccak: boolean;
    /** Largest JSON-RPC batch sent to an EVM RPC URL that accepts batches; 0 = never batch. */
    readonly rpcBatchSize: number;
    /** Replace a transaction not mined after this long (ms); undefined = 3 block times. */
    readonly stuckTxMs: number | undefined;
    /** Threads that answer EVM verifications beside the service's own (facilitator/verifyThreadPool.ts). */
    readonly verifyThreads: number;
    /** They start once EVM verifications reach this many in a second; 0 = at start. */
    readonly verifyThreadsAbove: number;
  };
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

const PRIVATE_KEY = /^0x[0-9a-fA-F]{64}$/;
/** ERC-8021 Schema 2 code, as `@x402/extensions/builder-code` accepts it. */
const BUILDER_CODE_FORMAT = /^[a-z0-9_]{1,32}$/;

function intVar(name: string, min: number, max: number, fallback: number) {
  return z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v.trim() === "") return fallback;
      const n = Number(v);
      if (!Number.isInteger(n) || n < min || n > max) {
        ctx.addIssue({
          code: "custom",
          message: `${name} must be a whole number from ${min} to ${max}, got "${v}"`,
        });
        return z.NEVER;
      }
      return n;
    });
}

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
  EVM_MIN_SIGNER_BALANCE_WEI: z
    .string()
    .regex(/^\d{1,40}$/, "EVM_MIN_SIGNER_BALANCE_WEI must be a whole number of wei")
    .default("2000000000000000"),
  EVM_STUCK_TX_MS: z.string().optional(),
  EVM_NATIVE_RECOVERY: z.enum(["true", "false", ""]).default("true"),
  EVM_NATIVE_KECCAK: z.enum(["true", "false", ""]).default("true"),
  BUILDER_CODE: z
    .string()
    .regex(BUILDER_CODE_FORMAT, "BUILDER_CODE must be 1-32 characters of a-z, 0-9 and _")
    .optional(),
  BUILDER_SERVICE_CODE: z
    .string()
    .regex(BUILDER_CODE_FORMAT, "BUILDER_SERVICE_CODE must be 1-32 characters of a-z, 0-9 and _")
    .optional(),
  EVM_RPC_BATCH_SIZE: intVar("EVM_RPC_BATCH_SIZE", 0, 1000, 100),
  // Two cores stay with the service's thread and what runs beside it (the
  // database thread, the RPC client's sockets, the OS); each core past them
  // (up to 4) gets a verify thread. On 2 cores a thread measured about 15%
  // more verifications for about 100 MB more peak memory: off by default.
  EVM_VERIFY_THREADS: intVar(
    "EVM_VERIFY_THREADS",
    0,
    64,
    Math.max(0, Math.min(4, availableParallelism() - 2)),
  ),
  EVM_VERIFY_THREADS_ABOVE: intVar("EVM_VERIFY_THREADS_ABOVE", 0, 1_000_000, 50),
  EVM_ERC6492_FACTORIES: z
    .string()
    .optional()
    .refine(
      (v) =>
        v === undefined ||
        v.split(",").every((a) => a.trim() === "" || /^0x[0-9a-fA-F]{40}$/.test(a.trim())),
      {
        message: "EVM_ERC6492_FACTORIES must be comma-separated 0x-prefixed 20-byte addresses",
      },
    ),
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

/** The per-key (per plan) rate-limit settings, which need per-key limits on. */
const PLAN_RATE_LIMIT_VARS = [
  "RATE_LIMIT_PLAN_WINDOW_MS",
  "RATE_LIMIT_PLAN_FREE",
  "RATE_LIMIT_PLAN_STARTER",
  "RATE_LIMIT_PLAN_PRO",
  "RATE_LIMIT_PLAN_MAX",
  "RATE_LIMIT_PLAN_PAYG",
] as const;

function formatIssues(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.join(".") || "env"}: ${i.message}`).join("; ");
}

/** Reads a secret from VAR, or from the file named by VAR_FILE. */
function readSecret(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const inline = env[name];
  const file = env[`${name}_FILE`];
  if (inline && file) throw new ConfigError(`set either ${name} or ${name}_FILE, not both`);
  if (file) {
    try {
      return readFileSync(file, "utf8");
    } catch (e) {
      throw new ConfigError(`${name}_FILE: cannot read ${file} (${(e as Error).message})`);
    }
  }
  return inline;
}

function parseKeys(raw: string | undefined, name: string): `0x${string}`[] {
  if (!raw) return [];
  const keys = raw
    .split("\n")
    .map((line) => line.replace(/#.*$/, ""))
    .flatMap((line) => line.split(/[\s,]+/))
    .map((k) => k.trim())
    .filter((k) => k.length > 0);
  keys.forEach((k, i) => {
    // Never echo the key itself: only its position.
    if (!PRIVATE_KEY.test(k)) {
      throw new ConfigError(
        `${name}: entry #${i + 1} is not a 32-byte hex private key (0x + 64 hex)`,
      );
    }
  });
  return keys as `0x${string}`[];
}

function parseEvmNetworks(env: NodeJS.ProcessEnv): EvmNetworkConfig[] {
  const out: EvmNetworkConfig[] = [];
  for (const [name, value] of Object.entries(env)) {
    const m = /^EVM_RPC_URLS_(\d+)$/.exec(name);
    if (!m || !value) continue;
    const id = `eip155:${m[1]}`;
    if (!findEvmNetwork(id)) {
      const known = EVM_NETWORKS.map((n) => n.chainId).join(", ");
      throw new ConfigError(
        `${name}: chain ${m[1]} is not a supported network (supported: ${known})`,
      );
    }
    const urls = value
      .split(",")
      .map((u) => u.trim())
      .filter(Boolean);
    for (const u of urls) {
      if (!/^(https?|wss?):\/\//.test(u)) {
        throw new ConfigError(`${name}: "${u}" is not an http(s) or ws(s) URL`);
      }
    }
    const ceiling = env[`EVM_MAX_GAS_PRICE_GWEI_${m[1]}`];
    let maxGasPriceWei: bigint | undefined;
    if (ceiling !== undefined && ceiling !== "") {
      const gwei = Number(ceiling);
      if (!Number.isFinite(gwei) || gwei <= 0) {
        throw new ConfigError(
          `EVM_MAX_GAS_PRICE_GWEI_${m[1]} must be a positive number of gwei, got "${ceiling}"`,
        );
      }
      maxGasPriceWei = BigInt(Math.round(gwei * 1e9));
    }
    const blockTime = env[`EVM_BLOCK_TIME_MS_${m[1]}`];
    let blockTimeMs: number | undefined;
    if (blockTime !== undefined && blockTime !== "") {
      blockTimeMs = Number(blockTime);
      if (!Number.isInteger(blockTimeMs) || blockTimeMs < 50 || blockTimeMs > 600_000) {
        throw new ConfigError(
          `EVM_BLOCK_TIME_MS_${m[1]} must be a whole number of milliseconds from 50 to 600000, got "${blockTime}"`,
        );
      }
    }
    out.push({ id, rpcUrls: urls, maxGasPriceWei, ...(blockTimeMs ? { blockTimeMs } : {}) });
  }
  return out.sort((a, b) => a.id.localeCompare(b.id));
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) throw new ConfigError(formatIssues(parsed.error));
  const e = parsed.data;

  const evmPrivateKeys = parseKeys(readSecret(env, "EVM_PRIVATE_KEYS"), "EVM_PRIVATE_KEYS");
  const evmNetworks = parseEvmNetworks(env);
  const [batchAuthorizerKey, ...extraAuthorizers] = parseKeys(
    readSecret(env, "EVM_BATCH_AUTHORIZER_KEY"),
    "EVM_BATCH_AUTHORIZER_KEY",
  );
  if (extraAuthorizers.length > 0) {
    throw new ConfigError("EVM_BATCH_AUTHORIZER_KEY takes exactly one key");
  }
  const svm = parseSvmConfig(env);
  const hasEvm = evmPrivateKeys.length > 0 || evmNetworks.length > 0;
  const xrpl = parseXrplConfig(env);
  const near = parseNearConfig(env);
  const starknet = parseStarknetConfig(env, readSecret(env, "STARKNET_EXECUTOR_KEYS"));
  const hasChainConfig =
    hasEvm ||
    svm.setup !== undefined ||
    xrpl.setup !== undefined ||
    near.setup !== undefined ||
    starknet.present;
  const mode = e.FACILITATOR_MODE ?? (hasChainConfig ? "production" : "devnet");

  if (mode === "devnet" && hasChainConfig) {
    throw new ConfigError(
      "FACILITATOR_MODE=devnet but chain configuration (EVM_RPC_URLS_*, EVM_PRIVATE_KEYS, SVM_RPC_URL, SVM_PRIVATE_KEYS, XRPL_RPC_URL, NEAR_RPC_URL, NEAR_RELAYER_KEYS, STARKNET_RPC_URL, STARKNET_EXECUTOR_KEYS) is set: remove one of them",
    );
  }
  if (mode === "production") {
    if (!hasChainConfig) {
      throw new ConfigError(
        "production mode needs at least one network: set EVM_RPC_URLS_<chainId> (e.g. EVM_RPC_URLS_8453=https://…) with EVM_PRIVATE_KEYS_FILE, or SVM_RPC_URL with SVM_PRIVATE_KEYS_FILE, or XRPL_RPC_URL, or NEAR_RPC_URL with NEAR_RELAYER_KEYS_FILE, or STARKNET_RPC_URL with STARKNET_EXECUTOR_KEYS_FILE",
      );
    }
    if (hasEvm && evmNetworks.length === 0) {
      throw new ConfigError(
        "EVM signer keys are set but no network: set EVM_RPC_URLS_<chainId>, e.g. EVM_RPC_URLS_8453=https://…",
      );
    }
    if (hasEvm && evmPrivateKeys.length === 0) {
      throw new ConfigError(
        "production mode needs signer keys: set EVM_PRIVATE_KEYS_FILE (or EVM_PRIVATE_KEYS)",
      );
    }
  }

  const confidential = parseConfidentialConfig(env, (name) => readSecret(env, name));
  if (confidential && mode === "production" && !evmNetworks.some((n) => n.id === "eip155:8453")) {
    throw new ConfigError(
      "confidential settlement runs on eip155:8453: set EVM_RPC_URLS_8453 as well",
    );
  }
  if (confidential && mode === "devnet") {
    throw new ConfigError(
      "CONFIDENTIAL_* variables are for production; devnet mode places its own vault: remove them",
    );
  }

  // Every network of every family, in the registry's order.
  const allNetworkIds = [
    ...EVM_NETWORKS,
    ...SVM_NETWORKS,
    ...XRPL_NETWORKS,
    ...NEAR_NETWORKS,
    ...STARKNET_NETWORKS,
  ].map((n) => n.id as string);
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

  const optionalMs = (name: string, raw: string | undefined, min: number): number | undefined => {
    if (raw === undefined || raw === "") return undefined;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min)
      throw new ConfigError(`${name} must be a whole number of milliseconds, at least ${min}`);
    return n;
  };
  const stuckTxMs = optionalMs("EVM_STUCK_TX_MS", e.EVM_STUCK_TX_MS, 500);
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
    confidential: {
      unitsPerSettlement: e.CONFIDENTIAL_UNITS_PER_SETTLEMENT,
      batchLeaseMs: e.CONFIDENTIAL_BATCH_LEASE_MS,
    },
    auth: parseAuthConfig(env, mode, (name) => readSecret(env, name)),
    confidentialVault: confidential,
    chains:
      mode === "production"
        ? {
            ...(hasEvm ? { evm: { privateKeys: evmPrivateKeys, networks: evmNetworks } } : {}),
            ...(svm.setup ? { svm: svm.setup } : {}),
            ...(xrpl.setup ? { xrpl: xrpl.setup } : {}),
            ...(near.setup ? { near: near.setup } : {}),
            ...(starknet.setup ? { starknet: starknet.setup } : {}),
          }
        : {},
    svm: svm.settings,
    xrpl: xrpl.settings,
    near: near.settings,
    starknet: starknet.settings,
    evm: {
      minSignerBalanceWei: BigInt(e.EVM_MIN_SIGNER_BALANCE_WEI),
      erc6492AllowedFactories: (e.EVM_ERC6492_FACTORIES === undefined
        ? // The devnet's own factory, so counterfactual wallets work out of the box.
          mode === "devnet"
          ? DEVNET_WALLET_FACTORY_ADDRESS
          : ""
        : e.EVM_ERC6492_FACTORIES
      )
        .split(",")
        .map((a) => a.trim())
        .filter(Boolean) as `0x${string}`[],
      batchAuthorizerKey,
      nativeRecovery: e.EVM_NATIVE_RECOVERY !== "false",
      nativeKeccak: e.EVM_NATIVE_KECCAK !== "false",
      rpcBatchSize: e.EVM_RPC_BATCH_SIZE,
      stuckTxMs,
      verifyThreads: e.EVM_VERIFY_THREADS,
      verifyThreadsAbove: e.EVM_VERIFY_THREADS_ABOVE,
    },
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
