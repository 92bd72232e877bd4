/**
 * The NEAR family's configuration, from the environment:
 *
 * - `NEAR_RPC_URL`: a nearcore JSON-RPC URL (serves `near:mainnet`);
 * - `NEAR_RELAYER_KEYS` / `NEAR_RELAYER_KEYS_FILE`: the relayers' full-access
 *   keys, `account_id:ed25519:<base58 secret>` each, comma- or
 *   line-separated (never logged). Several keys of one account settle in
 *   parallel, each with its own nonce;
 * - `NEAR_MIN_RELAYER_BALANCE`: NEAR below which a relayer account leaves
 *   the rotation (default 1);
 * - `NEAR_MIN_GAS_TGAS`, `NEAR_MAX_GAS_TGAS`: the gas an `ft_transfer` may
 *   attach (default 5 to 100 TGas): less runs out before the transfer, more
 *   only makes our relayer prepay for nothing;
 * - `NEAR_MIN_BLOCK_SECONDS`: the fastest block time assumed when bounding
 *   `max_block_height` by `maxTimeoutSeconds` (default 1, what clients use);
 * - `NEAR_FAILED_FEE_BUDGET_NEAR`: the hourly budget for fees of relayed
 *   transactions that fail on-chain, in flight included
 *   (src/chains/failedFeeBudget.ts), in NEAR, or `off` (default 2).
 */
import { readFileSync } from "node:fs";
import { parseNearAmount } from "@near-js/utils";
import { NEAR_MAINNET_ID } from "./networks.js";
import { ConfigError } from "../../lib/configError.js";
import { parseFailedFeeBudget } from "../failedFeeBudget.js";
import type { FamilyConfig } from "../ports.js";
import type { ConfigVariable } from "../../lib/envVars.js";
import type { NearSettings, NearSetup } from "./index.js";

interface NearConfig {
  setup: { networks: { id: string; rpcUrl: string }[]; relayerKeys: string[] } | undefined;
  settings: {
    minRelayerBalanceYocto: bigint;
    minGas: bigint;
    maxGas: bigint;
    minBlockSeconds: number;
    failedFeeBudgetYocto: bigint | undefined;
  };
}

const RELAYER_KEY = /^[a-z0-9._-]{2,64}:(ed25519|secp256k1):[1-9A-HJ-NP-Za-km-z]{40,140}$/;
const TGAS = 10n ** 12n;

function tgas(env: NodeJS.ProcessEnv, name: string, fallback: number): bigint {
  const raw = env[name]?.trim() || String(fallback);
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 300) {
    throw new ConfigError(`${name} must be a whole number of TGas from 1 to 300, got "${raw}"`);
  }
  return BigInt(n) * TGAS;
}

function parseNearConfig(env: NodeJS.ProcessEnv): NearConfig {
  const inline = env["NEAR_RELAYER_KEYS"];
  const file = env["NEAR_RELAYER_KEYS_FILE"];
  if (inline && file)
    throw new ConfigError("set either NEAR_RELAYER_KEYS or NEAR_RELAYER_KEYS_FILE, not both");
  let raw = inline ?? "";
  if (file) {
    try {
      raw = readFileSync(file, "utf8");
    } catch (e) {
      throw new ConfigError(
        `NEAR_RELAYER_KEYS_FILE: cannot read ${file} (${(e as Error).message})`,
      );
    }
  }
  const relayerKeys = raw
    .split(/[\n,]/)
    .map((l) => l.replace(/#.*$/, "").trim())
    .filter(Boolean);
  relayerKeys.forEach((k, i) => {
    if (!RELAYER_KEY.test(k)) {
      throw new ConfigError(
        `NEAR_RELAYER_KEYS entry ${i + 1} must read account_id:ed25519:<base58 secret key> (a full-access key of the relayer account)`,
      );
    }
  });
  const rpcUrl = env["NEAR_RPC_URL"]?.trim();
  if (rpcUrl && !/^https?:\/\//.test(rpcUrl)) {
    throw new ConfigError("NEAR_RPC_URL must be an http(s) URL, e.g. https://rpc.mainnet.near.org");
  }
  if (Boolean(rpcUrl) !== relayerKeys.length > 0) {
    throw new ConfigError(
      rpcUrl
        ? "NEAR_RPC_URL is set but no relayer keys: set NEAR_RELAYER_KEYS_FILE (or NEAR_RELAYER_KEYS)"
        : "NEAR_RELAYER_KEYS is set but no RPC: set NEAR_RPC_URL",
    );
  }
  const minBalance = env["NEAR_MIN_RELAYER_BALANCE"]?.trim() || "1";
  const yocto = /^\d+(\.\d{1,24})?$/.test(minBalance) ? parseNearAmount(minBalance) : null;
  if (!yocto) {
    throw new ConfigError(
      `NEAR_MIN_RELAYER_BALANCE must be an amount of NEAR such as 1 or 0.5, got "${minBalance}"`,
    );
  }
  const minGas = tgas(env, "NEAR_MIN_GAS_TGAS", 5);
  const maxGas = tgas(env, "NEAR_MAX_GAS_TGAS", 100);
  if (minGas > maxGas) throw new ConfigError("NEAR_MIN_GAS_TGAS must not exceed NEAR_MAX_GAS_TGAS");
  const blockRaw = env["NEAR_MIN_BLOCK_SECONDS"]?.trim() || "1";
  const block = Number(blockRaw);
  if (!Number.isFinite(block) || block < 0.1 || block > 10) {
    throw new ConfigError("NEAR_MIN_BLOCK_SECONDS must be a number of seconds from 0.1 to 10");
  }
  return {
    setup: rpcUrl ? { networks: [{ id: NEAR_MAINNET_ID, rpcUrl }], relayerKeys } : undefined,
    settings: {
      minRelayerBalanceYocto: BigInt(yocto),
      minGas,
      maxGas,
      minBlockSeconds: block,
      failedFeeBudgetYocto: parseFailedFeeBudget(env, "NEAR_FAILED_FEE_BUDGET_NEAR", 24, "2"),
    },
  };
}

/**
 * The variables this family reads, for docs/configuration.md (`npm run
 * docs:config`; a test fails when one read here is missing).
 */
const VARIABLES: readonly ConfigVariable[] = [
  {
    name: "NEAR_RPC_URL",
    description:
      "nearcore JSON-RPC (`http(s)://`) for `near:mainnet`; with relayer keys it serves NEAR.",
    example: "NEAR_RPC_URL=https://rpc.mainnet.near.org",
  },
  {
    name: "NEAR_RELAYER_KEYS",
    description:
      "Relayer full-access keys, `account_id:ed25519:<base58 secret>` each, comma- or line-separated (`#` comments allowed). Several keys of one account settle in parallel, each with its own nonce.",
    secret: true,
  },
  {
    name: "NEAR_MIN_RELAYER_BALANCE",
    default: "`1`",
    description:
      "NEAR below which a relayer account leaves the rotation (logged; `x402_signer_in_rotation` drops to 0).",
  },
  {
    name: "NEAR_MIN_GAS_TGAS",
    default: "`5`",
    description:
      "Least gas (TGas, 1 to 300) a payment's `ft_transfer` may attach: less runs out before the transfer.",
  },
  {
    name: "NEAR_MAX_GAS_TGAS",
    default: "`100`",
    description:
      "Most gas (TGas, 1 to 300) a payment's `ft_transfer` may attach: our relayer prepays it, so more only costs us.",
  },
  {
    name: "NEAR_MIN_BLOCK_SECONDS",
    default: "`1`",
    description:
      "Fastest block time assumed (0.1 to 10 s) when bounding `max_block_height` by `maxTimeoutSeconds`; 1 is what clients use.",
  },
  {
    name: "NEAR_FAILED_FEE_BUDGET_NEAR",
    default: "`2`",
    description:
      "The most NEAR the relayers may spend per hour on `near:mainnet` on relayed transactions that fail on-chain (a failing `ft_transfer` still burns the relayer's gas), counting every transaction still in flight at its worst fee (its prepaid gas plus 10 TGas for the receipts, at the chain's gas price). A settle that would pass it answers 503 `service_unavailable` (`reason: failed_settlement_gas_budget_spent`, with `Retry-After`; nothing sent). `off`: no budget. Shared by the replicas through the journal. At the floor gas price a failure burns about 0.0003 to 0.001 NEAR and a send holds at most 0.011 NEAR while in flight (at the 100 TGas ceiling).",
    example: "NEAR_FAILED_FEE_BUDGET_NEAR=0.5",
  },
];

export const nearConfig: FamilyConfig<NearSetup, NearSettings> = {
  present: (env) =>
    !!(env["NEAR_RPC_URL"] || env["NEAR_RELAYER_KEYS"] || env["NEAR_RELAYER_KEYS_FILE"]),
  hint: "NEAR_RPC_URL with NEAR_RELAYER_KEYS_FILE",
  variables: VARIABLES,
  parse: (env) => {
    const { setup, settings } = parseNearConfig(env);
    return setup ? { setup, settings } : { settings };
  },
};
