/**
 * The Solana family's configuration, from the environment:
 *
 * - `SVM_RPC_URL`: the mainnet RPC (serves `solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp`);
 * - `SVM_PRIVATE_KEYS` / `SVM_PRIVATE_KEYS_FILE`: fee-payer secret keys, base58
 *   of 64 bytes, comma- or line-separated (never logged);
 * - `SVM_COMMITMENT`: `confirmed` (default) or `finalized`;
 * - `SVM_MAX_COMPUTE_UNITS`, `SVM_MAX_PRIORITY_FEE_MICROLAMPORTS`: the most a
 *   payment's transaction may make a fee payer spend;
 * - `SVM_MIN_FEE_PAYER_LAMPORTS`: fee payers below it leave the rotation;
 * - `SVM_FAILED_FEE_BUDGET_SOL`: the hourly budget for fees of transactions
 *   that fail on-chain.
 */
import { readFileSync } from "node:fs";
import { SOLANA_MAINNET_ID } from "./networks.js";
import { ConfigError } from "../../lib/configError.js";
import type { FamilyConfig } from "../ports.js";
import type { ConfigVariable } from "../../lib/envVars.js";
import type { SvmSettings, SvmSetup } from "./index.js";
import { parseFailedFeeBudget } from "../failedFeeBudget.js";

interface SvmConfig {
  /** Present when the family is configured. */
  setup: { networks: { id: string; rpcUrl: string }[]; secretKeys: string[] } | undefined;
  settings: {
    commitment: "confirmed" | "finalized";
    maxComputeUnits: number;
    maxPriorityFeeMicroLamports: number;
    minFeePayerLamports: bigint;
    failedFeeBudgetLamports: bigint | undefined;
  };
}

const BASE58_SECRET = /^[1-9A-HJ-NP-Za-km-z]{80,90}$/;

function whole(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number) {
  const raw = env[name];
  if (raw === undefined || raw.trim() === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new ConfigError(`${name} must be a whole number from ${min} to ${max}, got "${raw}"`);
  }
  return n;
}

function parseSvmConfig(env: NodeJS.ProcessEnv): SvmConfig {
  const inline = env["SVM_PRIVATE_KEYS"];
  const file = env["SVM_PRIVATE_KEYS_FILE"];
  if (inline && file)
    throw new ConfigError("set either SVM_PRIVATE_KEYS or SVM_PRIVATE_KEYS_FILE, not both");
  let raw = inline ?? "";
  if (file) {
    try {
      raw = readFileSync(file, "utf8");
    } catch (e) {
      throw new ConfigError(`SVM_PRIVATE_KEYS_FILE: cannot read ${file} (${(e as Error).message})`);
    }
  }
  const secretKeys = raw
    .split(/[\n,]/)
    .map((l) => l.replace(/#.*$/, "").trim())
    .filter(Boolean);
  secretKeys.forEach((k, i) => {
    if (!BASE58_SECRET.test(k)) {
      throw new ConfigError(
        `SVM_PRIVATE_KEYS entry ${i + 1} is not a base58 64-byte secret key (the form Solana wallets export)`,
      );
    }
  });
  const rpcUrl = env["SVM_RPC_URL"]?.trim();
  if (rpcUrl && !/^https?:\/\//.test(rpcUrl)) {
    throw new ConfigError(`SVM_RPC_URL must be an http(s) URL`);
  }
  if (Boolean(rpcUrl) !== secretKeys.length > 0) {
    throw new ConfigError(
      rpcUrl
        ? "SVM_RPC_URL is set but no fee-payer keys: set SVM_PRIVATE_KEYS_FILE (or SVM_PRIVATE_KEYS)"
        : "SVM_PRIVATE_KEYS is set but no RPC: set SVM_RPC_URL",
    );
  }
  const commitment = env["SVM_COMMITMENT"]?.trim() || "confirmed";
  if (commitment !== "confirmed" && commitment !== "finalized") {
    throw new ConfigError(`SVM_COMMITMENT must be confirmed or finalized, got "${commitment}"`);
  }
  const minLamports = env["SVM_MIN_FEE_PAYER_LAMPORTS"]?.trim() || "10000000";
  if (!/^\d{1,20}$/.test(minLamports)) {
    throw new ConfigError("SVM_MIN_FEE_PAYER_LAMPORTS must be a whole number of lamports");
  }
  return {
    setup: rpcUrl ? { networks: [{ id: SOLANA_MAINNET_ID, rpcUrl }], secretKeys } : undefined,
    settings: {
      commitment,
      // The official client asks for 20,000 units at 1 micro-lamport; these
      // caps leave room for other clients and bound what one payment can cost.
      maxComputeUnits: whole(env, "SVM_MAX_COMPUTE_UNITS", 200_000, 1, 1_400_000),
      maxPriorityFeeMicroLamports: whole(
        env,
        "SVM_MAX_PRIORITY_FEE_MICROLAMPORTS",
        50_000,
        0,
        5_000_000,
      ),
      minFeePayerLamports: BigInt(minLamports),
      failedFeeBudgetLamports: parseFailedFeeBudget(env, "SVM_FAILED_FEE_BUDGET_SOL", 9, "0.05"),
    },
  };
}

/**
 * The variables this family reads, for docs/configuration.md (`npm run
 * docs:config`; a test fails when one read here is missing).
 */
const VARIABLES: readonly ConfigVariable[] = [
  {
    name: "SVM_RPC_URL",
    description:
      "Solana mainnet RPC URL (`http(s)://`). With fee-payer keys, `solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp` is served.",
  },
  {
    name: "SVM_PRIVATE_KEYS",
    description:
      "Fee-payer secret keys: base58 of 64 bytes (as Solana wallets export them), one per line or comma-separated (`#` comments allowed).",
    secret: true,
  },
  {
    name: "SVM_COMMITMENT",
    default: "`confirmed`",
    description: "What a Solana settlement waits for: `confirmed` or `finalized`.",
  },
  {
    name: "SVM_MAX_COMPUTE_UNITS",
    default: "`200000`",
    description:
      "Highest compute-unit limit a payment's transaction may set (1 to 1400000; the official client sets 20,000).",
  },
  {
    name: "SVM_MAX_PRIORITY_FEE_MICROLAMPORTS",
    default: "`50000`",
    description:
      "Highest compute-unit price a payment may make a fee payer pay (0 to 5000000; the official scheme would accept up to 5,000,000).",
  },
  {
    name: "SVM_MIN_FEE_PAYER_LAMPORTS",
    default: "`10000000` (0.01 SOL)",
    description:
      "A fee payer with less leaves the rotation (logged; `x402_signer_in_rotation` drops to 0) until topped up.",
  },
  {
    name: "SVM_FAILED_FEE_BUDGET_SOL",
    default: "`0.05`",
    description:
      "The most SOL the fee payers may spend per hour on the Solana network (the family serves one) on settlement transactions that fail on-chain (a failed transaction still pays its fee), counting every transaction still in flight at its fee (5,000 lamports a signature plus its priority fee). A settle that would pass it answers 503 `service_unavailable` (`reason: failed_settlement_gas_budget_spent`, with `Retry-After`; nothing sent). `off`: no budget. Shared by the replicas through the journal (read every few seconds and at start). A failure costs about 0.00001 to 0.00002 SOL, so the default allows a few thousand an hour.",
    example: "SVM_FAILED_FEE_BUDGET_SOL=0.01",
  },
];

export const svmConfig: FamilyConfig<SvmSetup, SvmSettings> = {
  present: (env) =>
    !!(env["SVM_RPC_URL"] || env["SVM_PRIVATE_KEYS"] || env["SVM_PRIVATE_KEYS_FILE"]),
  hint: "SVM_RPC_URL with SVM_PRIVATE_KEYS_FILE",
  variables: VARIABLES,
  parse: (env) => {
    const { setup, settings } = parseSvmConfig(env);
    return setup ? { setup, settings } : { settings };
  },
};
