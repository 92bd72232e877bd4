/**
 * The service's configuration as the rest of the code sees it: one validated,
 * read-only object built once at boot by ./load.ts. Kept apart from the
 * parsing so a reader of the type needs neither zod nor the environment.
 */
import type { ChainSetups, FamilySettings } from "../chains/index.js";
import type { NetworkDescription } from "../chains/ports.js";
import type { AuthConfig } from "./auth.js";
import type { ConfidentialConfig } from "./confidential.js";

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
    /**
     * Without a token: whether GET /metrics is open (devnet, or METRICS_PUBLIC)
     * or closed (production's default: it shows the failed-fee budget and
     * the signers' balances as they drain).
     */
    readonly metricsPublic: boolean;
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
    /** Payers' gas fundings (erc20ApprovalGasSponsoring) one account's settles may make in 24 hours. */
    readonly sponsoredFundingsPerDay: number;
    /**
     * Monthly prices of the paid plans the operator set, in micro-USD; a plan
     * left out costs its default (features/plans DEFAULT_PLAN_PRICES).
     */
    readonly prices: { readonly starter?: number; readonly pro?: number; readonly max?: number };
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
  /** Live API keys an account may create from the dashboard (rate limits count per account, all its keys together). */
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
