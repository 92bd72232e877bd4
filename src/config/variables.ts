/**
 * The documentation catalogue of the service's own variables (docs/configuration.md
 * is written from it by `npm run docs:config`). Data only: the parsing is in
 * ./schema.ts and ./load.ts.
 */
import type { ConfigVariable } from "../lib/envVars.js";
import { DEVNET_BILLING_PAY_TO } from "./schema.js";

/**
 * The variables ./schema.ts and ./load.ts read, by the section of docs/configuration.md
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
        "A settlement still `pending` after this long (its process died, or the answer was lost) is decided from the chain by the reconciler. A settle still running when it is judged interrupted sends nothing afterwards and answers `settlement_interrupted`.",
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
        "A bearer token (16 to 512 printable characters) that `GET /metrics` then requires as `Authorization: Bearer <token>` (401 without it, compared in constant time). Unset: in production `/metrics` answers 401 to everyone (it shows the failed-fee budget and the signers' balances as they drain), unless `METRICS_PUBLIC=true`; in devnet mode it is open.",
      secret: true,
    },
    {
      name: "METRICS_PUBLIC",
      default: "`false` in production, `true` in devnet mode",
      description:
        "`true`: `GET /metrics` is open without `METRICS_TOKEN`, for a scraper inside a private network that cannot send a bearer token. Ignored when `METRICS_TOKEN` is set.",
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
      description: "The per-account window (1000 to 3600000: 1 s to 1 h).",
    },
    {
      name: "RATE_LIMIT_PLAN_FREE",
      default: "`120`",
      description:
        "Requests per account (all its API keys together) per window on the `free` plan. `0`: no limit for the plan. Over it: 429 with `Retry-After`, the plan and the upgrade path.",
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
        "`redis://` or `rediss://`: rate-limit counters (per account and per IP) and each payer's one settle in flight, shared by every replica. Without it each process counts alone and holds a payer's settles one at a time only within itself, so in production a replica that finds another live replica on the same database server refuses payments (503, and `/ready` false) until every replica has it. Unreachable: requests are served uncounted, and a payer's settles wait in turn within each replica.",
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
      name: "SPONSORED_FUNDINGS_PER_DAY",
      default: "`100`",
      description:
        "How many payers one account's settles may fund with gas for their approve of Permit2 (`erc20ApprovalGasSponsoring`) in 24 hours, across networks; past it the payment is refused `erc20_approval_funding_budget_spent` (a payer holding its own gas is not affected). Each funding is at most one approve's gas (see [EVM](chains/evm.md)). `0` funds no one.",
    },
    {
      name: "PAYER_FAILURE_COOLING_SECONDS",
      default: "`3600`",
      description:
        "How long a payer whose own payment failed on-chain (its wallet's code, or its own move of the funds or the nonce, at our gas cost) is refused before anything is sent, on every account: the settle answers `payer_failed_onchain_recently`, and so does a verify (`isValid: false`). Such failures do not count against the settling account's failure limit, also when the failure is decided later from the chain (by a retry or the reconciler, after a `settlement_pending` answer or a restart): the chain's own reason for the transaction names the payer on NEAR, Starknet and the XRP Ledger, the payer's state on EVM and Solana. `0` turns the cooling off.",
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
