/**
 * The EVM family's configuration, from the environment:
 *
 * - `EVM_RPC_URLS_<chainId>`: one or more RPC URLs per served network
 *   (comma-separated); `EVM_MAX_GAS_PRICE_GWEI_<chainId>` and
 *   `EVM_BLOCK_TIME_MS_<chainId>` tune one network;
 * - `EVM_PRIVATE_KEYS` / `EVM_PRIVATE_KEYS_FILE`: the signer keys (never
 *   logged, never echoed in an error: only an entry's position is);
 * - `EVM_BATCH_AUTHORIZER_KEY(_FILE)`: the key that co-signs batch-settlement
 *   claims and refunds for resource servers that delegate to this service;
 * - the switches and limits below (`EVM_MIN_SIGNER_BALANCE_WEI`, …).
 */
import { availableParallelism } from "node:os";
import { z } from "zod";
import { parseEther, type Hex } from "viem";
import { ConfigError } from "../../lib/configError.js";
import {
  intVar,
  listEntries,
  optionalMs,
  parseEnv,
  readSecret,
  type ConfigVariable,
} from "../../lib/envVars.js";
import type { FamilyConfig } from "../ports.js";
import { DEVNET_WALLET_FACTORY_ADDRESS, EVM_NETWORKS, findEvmNetwork } from "./networks.js";

interface EvmNetworkConfig {
  /** CAIP-2 id. */
  readonly id: string;
  readonly rpcUrls: readonly string[];
  /** Refuse to settle when maxFeePerGas would exceed this (wei). */
  readonly maxGasPriceWei?: bigint | undefined;
  /** How often the chain makes a block, when the operator says otherwise than the registry. */
  readonly blockTimeMs?: number | undefined;
}

/** What to serve: the networks and the signer keys. */
export interface EvmSetup {
  readonly networks: readonly EvmNetworkConfig[];
  /** Facilitator signer keys (hex). Never logged. */
  readonly privateKeys: readonly Hex[];
}

/** How to run the family (see createEvm.ts). */
export interface EvmSettings {
  /** Signers with less native balance than this (wei) leave the rotation. */
  readonly minSignerBalanceWei: bigint;
  /**
   * The most gas one settlement transaction may be given: with the price
   * ceiling per network (EVM_MAX_GAS_PRICE_GWEI_<chainId>), the most one
   * settlement can cost us. Above it: refused, nothing sent.
   */
  readonly maxGasPerTransaction: bigint;
  /**
   * Each network's hourly budget (wei) for settlement transactions that fail
   * on-chain, in flight included (src/chains/failedFeeBudget.ts): the
   * `EVM_FAILED_GAS_BUDGET_NATIVE` default and its per-chain overrides.
   */
  readonly failedGasBudgetWei: {
    readonly default: bigint | undefined;
    readonly byChainId: ReadonlyMap<number, bigint>;
  };
  /**
   * Factories the service may call to deploy a counterfactual (ERC-6492)
   * payer wallet at settle. Empty: such wallets cannot pay until deployed.
   */
  readonly erc6492AllowedFactories: readonly Hex[];
  /**
   * Wallet implementations (an EIP-7702 delegate, an ERC-1967 proxy's
   * implementation) whose signature check gets the contract-wallet gas
   * allowance from a payer's first payment (signer/payerCode.ts).
   */
  readonly knownWalletImplementations: readonly Hex[];
  /**
   * Key that co-signs batch-settlement claims and refunds for resource
   * servers that delegate to this service (`receiverAuthorizer`). Absent:
   * not advertised, and servers sign their own.
   */
  readonly batchAuthorizerKey: Hex | undefined;
  /** Recover EOA signatures inside viem with libsecp256k1 (viemNativeRecovery.ts). */
  readonly nativeRecovery: boolean;
  /** Hash keccak-256 inside viem natively (viemNativeKeccak.ts). */
  readonly nativeKeccak: boolean;
  /** Largest JSON-RPC batch sent to an RPC URL that accepts batches; 0 = never batch. */
  readonly rpcBatchSize: number;
  /** Replace a transaction not mined after this long (ms); undefined = 3 block times. */
  readonly stuckTxMs: number | undefined;
  /** Threads that answer verifications beside the service's own (facilitator/verifyThreadPool.ts). */
  readonly verifyThreads: number;
  /** They start once verifications reach this many in a second; 0 = at start. */
  readonly verifyThreadsAbove: number;
}

const PRIVATE_KEY = /^0x[0-9a-fA-F]{64}$/;

const EvmEnv = z.object({
  EVM_MIN_SIGNER_BALANCE_WEI: z
    .string()
    .regex(/^\d{1,40}$/, "EVM_MIN_SIGNER_BALANCE_WEI must be a whole number of wei")
    .default("2000000000000000"),
  EVM_STUCK_TX_MS: z.string().optional(),
  // The largest honest shape is a batch-settlement claim of many vouchers
  // (tens of thousands of gas each); a USDC transfer takes about 60,000.
  EVM_MAX_GAS_PER_TX: intVar("EVM_MAX_GAS_PER_TX", 100_000, 30_000_000, 3_000_000),
  EVM_NATIVE_RECOVERY: z.enum(["true", "false", ""]).default("true"),
  EVM_NATIVE_KECCAK: z.enum(["true", "false", ""]).default("true"),
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
  EVM_ERC6492_FACTORIES: addressList("EVM_ERC6492_FACTORIES"),
  EVM_KNOWN_WALLET_IMPLEMENTATIONS: addressList("EVM_KNOWN_WALLET_IMPLEMENTATIONS"),
});

/** A comma-separated list of 0x-prefixed 20-byte addresses (blank entries ignored). */
function addressList(name: string) {
  return z
    .string()
    .optional()
    .refine(
      (v) =>
        v === undefined ||
        v.split(",").every((a) => a.trim() === "" || /^0x[0-9a-fA-F]{40}$/.test(a.trim())),
      { message: `${name} must be comma-separated 0x-prefixed 20-byte addresses` },
    );
}

/** The entries of an address list. */
function addresses(list: string): Hex[] {
  return list
    .split(",")
    .map((a) => a.trim())
    .filter(Boolean) as Hex[];
}

/**
 * Coinbase Smart Wallet's implementations (its accounts are ERC-1967
 * proxies of these, deployed at the same addresses on every chain it
 * serves): an ECDSA or passkey owner, the passkey check the costliest.
 */
const DEFAULT_KNOWN_WALLET_IMPLEMENTATIONS =
  "0x000100abaad02f1cfC8Bbe32bD5a564817339E72,0x00000110dCdEdC9581cb5eCB8467282f2926534d";

/** A budget in whole native units ("0.5"); "off": none. */
function nativeBudget(name: string, raw: string): bigint | undefined {
  if (raw === "off") return undefined;
  if (!/^\d{1,12}(\.\d{1,18})?$/.test(raw)) {
    throw new ConfigError(
      `${name} must be an amount of the network's native currency (e.g. 0.5) or "off", got "${raw}"`,
    );
  }
  return parseEther(raw);
}

/** EVM_FAILED_GAS_BUDGET_NATIVE and its EVM_FAILED_GAS_BUDGET_NATIVE_<chainId> overrides. */
function parseFailedGasBudgets(env: NodeJS.ProcessEnv): EvmSettings["failedGasBudgetWei"] {
  const byChainId = new Map<number, bigint>();
  for (const { chainId } of EVM_NETWORKS) {
    const name = `EVM_FAILED_GAS_BUDGET_NATIVE_${chainId}`;
    const value = env[name];
    if (value === undefined || value === "") continue;
    const budget = nativeBudget(name, value);
    if (budget !== undefined) byChainId.set(chainId, budget);
  }
  const raw = env["EVM_FAILED_GAS_BUDGET_NATIVE"];
  if (raw === undefined || raw === "") {
    // No service-wide figure: each network's own default, sized in value.
    for (const [chainId, amount] of DEFAULT_FAILED_GAS_BUDGETS) {
      if (!byChainId.has(chainId)) byChainId.set(chainId, parseEther(amount));
    }
  }
  return {
    default: nativeBudget(
      "EVM_FAILED_GAS_BUDGET_NATIVE",
      raw === undefined || raw === "" ? DEFAULT_FAILED_GAS_BUDGET : raw,
    ),
    byChainId,
  };
}

/**
 * Each network's default hourly failed-gas budget, in its own native
 * currency, sized to about the same value (docs/chains/evm.md has the table
 * and the prices it assumes): a few hundred dollars an hour at most, and
 * thousands of failed payments at the network's usual fees, so honest
 * traffic never meets it.
 */
const DEFAULT_FAILED_GAS_BUDGETS: ReadonlyMap<number, string> = new Map([
  [137, "200"], // Polygon PoS: POL
  [42220, "200"], // Celo: CELO
  [43114, "4"], // Avalanche C-Chain: AVAX
  [143, "100"], // Monad: MON, charged on the gas limit
]);
/** The ETH-priced networks (Base, Arbitrum, OP, Linea, Unichain, World Chain, USDG chain). */
const DEFAULT_FAILED_GAS_BUDGET = "0.1";

function parseKeys(raw: string | undefined, name: string): Hex[] {
  const keys = listEntries(raw);
  keys.forEach((k, i) => {
    // Never echo the key itself: only its position.
    if (!PRIVATE_KEY.test(k)) {
      throw new ConfigError(
        `${name}: entry #${i + 1} is not a 32-byte hex private key (0x + 64 hex)`,
      );
    }
  });
  return keys as Hex[];
}

function parseNetworks(env: NodeJS.ProcessEnv): EvmNetworkConfig[] {
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

/**
 * The variables this family reads, for docs/configuration.md (`npm run
 * docs:config`; a test fails when one read here is missing).
 */
const VARIABLES: readonly ConfigVariable[] = [
  {
    name: "EVM_RPC_URLS_<chainId>",
    description:
      "Comma-separated RPC URLs for a network (`http(s)://` or `ws(s)://`). Several URLs fail over (viem fallback). A network is served if and only if it has URLs.",
    example: "EVM_RPC_URLS_8453=https://base-a.example,https://base-b.example",
  },
  {
    name: "EVM_PRIVATE_KEYS",
    description:
      "The facilitator's signer keys, `0x` and 64 hex each, comma-, space- or line-separated (`#` comments allowed in the file, the preferred form). An error names only an entry's position.",
    secret: true,
    example: "EVM_PRIVATE_KEYS_FILE=/run/secrets/facilitator-keys",
  },
  {
    name: "EVM_MAX_GAS_PRICE_GWEI_<chainId>",
    default: "no ceiling",
    description:
      "Highest gas price a settlement on that network may cost, in gwei. Above it the settle is refused with `gas_price_too_high` and nothing is signed.",
    example: "EVM_MAX_GAS_PRICE_GWEI_8453=5",
  },
  {
    name: "EVM_BLOCK_TIME_MS_<chainId>",
    default: "the network's own (Base: 2000)",
    description:
      "How often that network makes a block, in milliseconds (50 to 600000), when it is not what the service knows of it, e.g. after a chain upgrade or for a test network. The receipt watcher ticks at a twentieth of it (every settle waits half a tick on average), block numbers are trusted for an eighth, fee quotes for half (at least 250 ms), and a transaction not mined after three blocks (at least 5 s) is replaced. The devnet of `npm start` sets it from `DEVNET_BLOCK_TIME`.",
  },
  {
    name: "EVM_MIN_SIGNER_BALANCE_WEI",
    default: "`2000000000000000` (0.002 ETH)",
    description:
      "A signer account with less native balance leaves the rotation (logged, and `x402_signer_in_rotation` drops to 0) until it is topped up. `0` disables the check.",
  },
  {
    name: "EVM_MAX_GAS_PER_TX",
    default: "`3000000`",
    description:
      "The most gas one settlement transaction may be given (100,000 to 30,000,000); above it the settle is refused `gas_limit_too_high` and nothing is sent. With `EVM_MAX_GAS_PRICE_GWEI_<chainId>` it bounds what one settlement can cost.",
  },
  {
    name: "EVM_FAILED_GAS_BUDGET_NATIVE",
    default:
      "per network: `0.1` ETH; Polygon `200` POL, Celo `200` CELO, Avalanche `4` AVAX, Monad `100` MON",
    description:
      "The most native currency (ETH, POL, …) the service's signers may spend per network and hour on settlement transactions that fail on-chain, counting every transaction still in flight at its gas limit times its maximum fee; one account's failures (and, once it has failed, its sends in flight) may use at most a quarter of it; as failures spend it the riskiest payers are refused first: from three eighths, payers whose address carries code and that have no settled payment on record; from half, any payer with no settled payment on record; from five eighths, any payer with code; past three quarters, accounts with failures of their own; a settle that would pass it answers 503 `service_unavailable` (`reason: failed_settlement_gas_budget_spent`, with `Retry-After`; nothing sent) until the hour's failures age out. `off`: no budget. Shared by the replicas: failures and transactions in flight count from the journal every replica writes (read every few seconds and at start), and what this replica sent since its last read. Watch `x402_failed_settlement_gas_native_total` against `x402_failed_settlement_gas_budget_native` ([Operations](operations.md)).",
    example: "EVM_FAILED_GAS_BUDGET_NATIVE=0.2",
  },
  {
    name: "EVM_FAILED_GAS_BUDGET_NATIVE_<chainId>",
    default: "`EVM_FAILED_GAS_BUDGET_NATIVE`",
    description:
      "The same budget for one network, in its own native currency (a network whose currency is worth little needs a larger number). Set, it takes the place of both `EVM_FAILED_GAS_BUDGET_NATIVE` and the network's default.",
    example: "EVM_FAILED_GAS_BUDGET_NATIVE_137=50",
  },
  {
    name: "EVM_STUCK_TX_MS",
    default: "3 block times, at least 5 s",
    description:
      "A settlement transaction not mined after this long (at least 500) is replaced at the same nonce with higher fees.",
  },
  {
    name: "EVM_RPC_BATCH_SIZE",
    default: "`100`",
    description:
      "Largest JSON-RPC batch (0 to 1000). Calls made together (many concurrent verifications and settlements) travel in one HTTP request to each RPC URL that answered a test batch at start; a URL that did not is called one by one (logged). `0` never batches.",
  },
  {
    name: "EVM_NATIVE_RECOVERY",
    default: "`true`",
    description:
      "Recover EOA signatures inside viem with libsecp256k1 instead of pure JavaScript (about 10× less CPU per signature; checked against viem at start, off by itself if the check fails; `x402_native_signature_recovery` says which). `false` leaves viem untouched.",
  },
  {
    name: "EVM_NATIVE_KECCAK",
    default: "`true`",
    description:
      "Hash keccak-256 inside viem with the `keccak` package's native build instead of pure JavaScript (typed-data hashes and address checksums of every verification; checked against viem at start, off by itself if the check fails). `false` leaves viem untouched.",
  },
  {
    name: "EVM_VERIFY_THREADS",
    default: "one per core past two, at most 4 (0 on 2 cores)",
    description:
      "Threads (0 to 64) that answer EVM verifications beside the service's own thread, each with its own copy of the EVM mechanisms, built from the same configuration. They only read the chain; every settle stays on the service's thread. A thread holds about 80–100 MB under load, so they start only when verification is busy (`EVM_VERIFY_THREADS_ABOVE`) and stop after a minute without an EVM verification. A thread that dies is replaced, and what it held is verified on the service's thread. On 2 cores one thread gave about 30% more verifications for about 85 MB (see [Benchmarks](benchmarks.md)); set `1` there if verification, not memory, is what you are short of. `0` verifies on the service's thread only.",
  },
  {
    name: "EVM_VERIFY_THREADS_ABOVE",
    default: "`50`",
    description:
      "EVM verifications in one second that start the verify threads. `0` starts them with the service.",
  },
  {
    name: "EVM_ERC6492_FACTORIES",
    default: "none (devnet mode: the devnet factory)",
    description:
      "Comma-separated factory addresses the service may call to deploy a counterfactual (ERC-6492) payer wallet at settle. Empty: such payers are refused until their wallet exists.",
  },
  {
    name: "EVM_KNOWN_WALLET_IMPLEMENTATIONS",
    default: "Coinbase Smart Wallet's two implementations",
    description:
      "Comma-separated wallet implementation addresses (an EIP-7702 delegate, or the implementation an ERC-1967 proxy wallet names) whose signature check may use the contract-wallet gas allowance (250,000 gas a check) from a payer's first payment. A payer whose address carries other code gets that allowance only once it has a settled payment on record; before, its settle may use the payment shape's own ceiling (twice the honest cost), which covers ECDSA-owned smart wallets and passkey checks through the P-256 precompile, and a costlier check is refused `gas_limit_too_high` with nothing sent. Addresses without code keep the full ceiling. Empty: only payers with a settled payment get the allowance.",
    example: "EVM_KNOWN_WALLET_IMPLEMENTATIONS=0x000100abaad02f1cfC8Bbe32bD5a564817339E72",
  },
  {
    name: "EVM_BATCH_AUTHORIZER_KEY",
    default: "none (devnet mode: a devnet key)",
    description:
      "One key that co-signs `batch-settlement` claims and refunds for resource servers that delegate to this service; its address is advertised as `receiverAuthorizer` in `/supported`. Without it servers sign their own.",
    secret: true,
  },
];

export const evmConfig: FamilyConfig<EvmSetup, EvmSettings> = {
  present: (env) =>
    Object.entries(env).some(
      ([name, value]) =>
        !!value && (/^EVM_RPC_URLS_\d+$/.test(name) || /^EVM_PRIVATE_KEYS(_FILE)?$/.test(name)),
    ),
  hint: "EVM_RPC_URLS_<chainId> (e.g. EVM_RPC_URLS_8453=https://…) with EVM_PRIVATE_KEYS_FILE",
  variables: VARIABLES,
  parse(env, mode) {
    const e = parseEnv(EvmEnv, env);
    const privateKeys = parseKeys(readSecret(env, "EVM_PRIVATE_KEYS"), "EVM_PRIVATE_KEYS");
    const networks = parseNetworks(env);
    const [batchAuthorizerKey, ...extraAuthorizers] = parseKeys(
      readSecret(env, "EVM_BATCH_AUTHORIZER_KEY"),
      "EVM_BATCH_AUTHORIZER_KEY",
    );
    if (extraAuthorizers.length > 0) {
      throw new ConfigError("EVM_BATCH_AUTHORIZER_KEY takes exactly one key");
    }
    const present = privateKeys.length > 0 || networks.length > 0;
    if (present && networks.length === 0) {
      throw new ConfigError(
        "EVM signer keys are set but no network: set EVM_RPC_URLS_<chainId>, e.g. EVM_RPC_URLS_8453=https://…",
      );
    }
    if (present && privateKeys.length === 0) {
      throw new ConfigError(
        "production mode needs signer keys: set EVM_PRIVATE_KEYS_FILE (or EVM_PRIVATE_KEYS)",
      );
    }
    const factories =
      e.EVM_ERC6492_FACTORIES ??
      // The devnet's own factory, so counterfactual wallets work out of the box.
      (mode === "devnet" ? DEVNET_WALLET_FACTORY_ADDRESS : "");
    return {
      ...(present ? { setup: { networks, privateKeys } } : {}),
      settings: {
        minSignerBalanceWei: BigInt(e.EVM_MIN_SIGNER_BALANCE_WEI),
        maxGasPerTransaction: BigInt(e.EVM_MAX_GAS_PER_TX),
        failedGasBudgetWei: parseFailedGasBudgets(env),
        erc6492AllowedFactories: addresses(factories),
        knownWalletImplementations: addresses(
          e.EVM_KNOWN_WALLET_IMPLEMENTATIONS ?? DEFAULT_KNOWN_WALLET_IMPLEMENTATIONS,
        ),
        batchAuthorizerKey,
        nativeRecovery: e.EVM_NATIVE_RECOVERY !== "false",
        nativeKeccak: e.EVM_NATIVE_KECCAK !== "false",
        rpcBatchSize: e.EVM_RPC_BATCH_SIZE,
        stuckTxMs: optionalMs("EVM_STUCK_TX_MS", e.EVM_STUCK_TX_MS, 500),
        verifyThreads: e.EVM_VERIFY_THREADS,
        verifyThreadsAbove: e.EVM_VERIFY_THREADS_ABOVE,
      },
    };
  },
};
