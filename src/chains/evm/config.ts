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
import type { Hex } from "viem";
import { ConfigError } from "../../lib/configError.js";
import { intVar, listEntries, optionalMs, parseEnv, readSecret } from "../../lib/envVars.js";
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
   * Factories the service may call to deploy a counterfactual (ERC-6492)
   * payer wallet at settle. Empty: such wallets cannot pay until deployed.
   */
  readonly erc6492AllowedFactories: readonly Hex[];
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
});

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

export const evmConfig: FamilyConfig<EvmSetup, EvmSettings> = {
  present: (env) =>
    Object.entries(env).some(
      ([name, value]) =>
        !!value && (/^EVM_RPC_URLS_\d+$/.test(name) || /^EVM_PRIVATE_KEYS(_FILE)?$/.test(name)),
    ),
  hint: "EVM_RPC_URLS_<chainId> (e.g. EVM_RPC_URLS_8453=https://…) with EVM_PRIVATE_KEYS_FILE",
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
        erc6492AllowedFactories: factories
          .split(",")
          .map((a) => a.trim())
          .filter(Boolean) as Hex[],
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
