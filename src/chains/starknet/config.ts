/**
 * The Starknet family's configuration, from the environment:
 *
 * - `STARKNET_RPC_URL`: a Starknet JSON-RPC (spec 0.10) URL over HTTP(S)
 *   (serves `starknet:SN_MAIN`).
 * - `STARKNET_EXECUTOR_KEYS` or, better, `STARKNET_EXECUTOR_KEYS_FILE`: the
 *   executor accounts that submit payments and pay their fees, one
 *   `address:privateKey` pair per entry (separated by newlines, spaces or
 *   commas; `#` starts a comment). Deployed SNIP-6 accounts with STRK.
 * - `STARKNET_MIN_EXECUTOR_STRK`: an executor holding less STRK leaves the
 *   rotation until topped up (default 5).
 * - `STARKNET_TIME_SKEW_SECONDS`: how far the sequencer's block timestamp may
 *   trail the wall clock (default 30): `Execute After` must lie that far in
 *   the past, and `Execute Before` at least that far ahead.
 * - `STARKNET_FAILED_FEE_BUDGET_STRK`: the hourly budget for fees of
 *   settlements that revert on-chain, in flight included
 *   (src/chains/failedFeeBudget.ts), in STRK, or `off` (default 25).
 */
import { STARKNET_MAINNET_ID } from "./networks.js";
import { ConfigError } from "../../lib/configError.js";
import type { FamilyConfig } from "../ports.js";
import type { StarknetSettings, StarknetSetup } from "./index.js";
import { readSecret, type ConfigVariable } from "../../lib/envVars.js";
import { parseFailedFeeBudget } from "../failedFeeBudget.js";

interface StarknetConfig {
  setup:
    | {
        networks: { id: string; rpcUrl: string }[];
        executors: { address: string; privateKey: string }[];
      }
    | undefined;
  settings: {
    minExecutorFeeBalance: bigint;
    timeSkewSeconds: number;
    maxFeeFri: bigint;
    failedFeeBudgetFri: bigint | undefined;
  };
  /** Whether any Starknet production setting is present (for devnet/production mode). */
  present: boolean;
}

const FELT = /^0x[0-9a-fA-F]{1,64}$/;

function parseExecutors(raw: string | undefined): { address: string; privateKey: string }[] {
  if (!raw) return [];
  const entries = raw
    .split("\n")
    .map((line) => line.replace(/#.*$/, ""))
    .flatMap((line) => line.split(/[\s,]+/))
    .map((e) => e.trim())
    .filter(Boolean);
  return entries.map((entry, i) => {
    const [address, privateKey, ...rest] = entry.split(":");
    // Never echo the entry: it holds a key. Only its position.
    if (
      !address ||
      !privateKey ||
      rest.length > 0 ||
      !FELT.test(address) ||
      !FELT.test(privateKey)
    ) {
      throw new ConfigError(
        `STARKNET_EXECUTOR_KEYS: entry #${i + 1} must be address:privateKey, both 0x-prefixed hex felts`,
      );
    }
    return { address: address.toLowerCase(), privateKey };
  });
}

/** STRK, as a decimal with up to 18 places, in FRI. */
function strkToFri(raw: string): bigint | undefined {
  const m = /^(\d{1,12})(?:\.(\d{1,18}))?$/.exec(raw);
  if (!m) return undefined;
  return BigInt(m[1]!) * 10n ** 18n + BigInt((m[2] ?? "").padEnd(18, "0"));
}

function parseStarknetConfig(
  env: NodeJS.ProcessEnv,
  executorKeys: string | undefined,
): StarknetConfig {
  const rpcUrl = env["STARKNET_RPC_URL"]?.trim();
  if (rpcUrl && !/^https?:\/\//.test(rpcUrl)) {
    throw new ConfigError("STARKNET_RPC_URL must be a Starknet JSON-RPC URL over http(s)");
  }
  const executors = parseExecutors(executorKeys);
  const present = Boolean(rpcUrl) || executors.length > 0;
  if (present && !rpcUrl) {
    throw new ConfigError("Starknet executor keys are set but no network: set STARKNET_RPC_URL");
  }
  if (present && executors.length === 0) {
    throw new ConfigError(
      "STARKNET_RPC_URL is set but no executor: set STARKNET_EXECUTOR_KEYS_FILE (address:privateKey per line)",
    );
  }
  const minRaw = env["STARKNET_MIN_EXECUTOR_STRK"]?.trim() || "5";
  const minExecutorFeeBalance = strkToFri(minRaw);
  if (minExecutorFeeBalance === undefined) {
    throw new ConfigError("STARKNET_MIN_EXECUTOR_STRK must be an amount of STRK, e.g. 5 or 0.5");
  }
  const skewRaw = env["STARKNET_TIME_SKEW_SECONDS"]?.trim() || "30";
  const skew = Number(skewRaw);
  if (!Number.isInteger(skew) || skew < 5 || skew > 120) {
    throw new ConfigError(
      "STARKNET_TIME_SKEW_SECONDS must be a whole number of seconds from 5 to 120",
    );
  }
  // A USDC transfer through an outside execution costs a few hundredths of
  // a STRK; one STRK leaves room for heavy account contracts and fee spikes.
  const maxFeeRaw = env["STARKNET_MAX_FEE_STRK"]?.trim() || "1";
  const maxFeeFri = strkToFri(maxFeeRaw);
  if (maxFeeFri === undefined || maxFeeFri === 0n) {
    throw new ConfigError(
      "STARKNET_MAX_FEE_STRK must be a positive amount of STRK, e.g. 1 or 0.25",
    );
  }
  return {
    setup: present
      ? { networks: [{ id: STARKNET_MAINNET_ID, rpcUrl: rpcUrl! }], executors }
      : undefined,
    settings: {
      minExecutorFeeBalance,
      timeSkewSeconds: skew,
      maxFeeFri,
      failedFeeBudgetFri: parseFailedFeeBudget(env, "STARKNET_FAILED_FEE_BUDGET_STRK", 18, "25"),
    },
    present,
  };
}

/**
 * The variables this family reads, for docs/configuration.md (`npm run
 * docs:config`; a test fails when one read here is missing).
 */
const VARIABLES: readonly ConfigVariable[] = [
  {
    name: "STARKNET_RPC_URL",
    description:
      "Starknet JSON-RPC (spec 0.10) over HTTP(S) for `starknet:SN_MAIN`. Needs executor keys.",
  },
  {
    name: "STARKNET_EXECUTOR_KEYS",
    description:
      "The executor accounts that submit payments and pay their fees in STRK: one `address:privateKey` per entry, both `0x` hex felts, separated by newlines, spaces or commas (`#` comments allowed). Deployed accounts holding STRK.",
    secret: true,
  },
  {
    name: "STARKNET_MIN_EXECUTOR_STRK",
    default: "`5`",
    description:
      "An executor with less STRK leaves the rotation (logged; `x402_signer_in_rotation` drops to 0) until topped up.",
  },
  {
    name: "STARKNET_TIME_SKEW_SECONDS",
    default: "`30`",
    description:
      "How far the sequencer's timestamp may trail ours (5 to 120 s), when checking `Execute After` / `Execute Before`.",
  },
  {
    name: "STARKNET_MAX_FEE_STRK",
    default: "`1`",
    description:
      "The most one settlement may cost an executor, in STRK: the simulation's resource bounds (amount times price, summed) above it are refused `invalid_exact_starknet_fee_too_high` and nothing is sent.",
  },
  {
    name: "STARKNET_FAILED_FEE_BUDGET_STRK",
    default: "`25`",
    description:
      "The most STRK the executors may spend per hour on `starknet:SN_MAIN` on settlements that revert on-chain (a reverted transaction still pays its fee), counting every transaction still in flight at its worst fee (its resource bounds' maximum fee). A settle that would pass it answers 503 `service_unavailable` (`reason: failed_settlement_gas_budget_spent`, with `Retry-After`; nothing sent). `off`: no budget. Shared by the replicas through the journal. A revert costs a few hundredths of a STRK and a send holds at most `STARKNET_MAX_FEE_STRK` while in flight.",
    example: "STARKNET_FAILED_FEE_BUDGET_STRK=5",
  },
];

export const starknetConfig: FamilyConfig<StarknetSetup, StarknetSettings> = {
  present: (env) =>
    !!(
      env["STARKNET_RPC_URL"] ||
      env["STARKNET_EXECUTOR_KEYS"] ||
      env["STARKNET_EXECUTOR_KEYS_FILE"]
    ),
  hint: "STARKNET_RPC_URL with STARKNET_EXECUTOR_KEYS_FILE",
  variables: VARIABLES,
  parse: (env) => {
    const { setup, settings } = parseStarknetConfig(env, readSecret(env, "STARKNET_EXECUTOR_KEYS"));
    return setup ? { setup, settings } : { settings };
  },
};
