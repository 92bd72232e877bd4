/**
 * The XRP Ledger family's configuration, from the environment:
 *
 * - `XRPL_RPC_URL`: a rippled JSON-RPC URL over HTTP(S) (serves `xrpl:0`).
 *   The model is keyless, so no keys: the payer signs and pays its own fee.
 * - `XRPL_MAX_FEE_DROPS`: the highest fee a payment may carry (default
 *   10000 drops, 0.01 XRP); above it the payment is refused, since a
 *   resource server should not be the reason a payer overpays.
 * - `XRPL_MIN_LEDGER_CLOSE_SECONDS`: the fastest ledger close assumed when
 *   bounding `LastLedgerSequence` by `maxTimeoutSeconds` (default 3; mainnet
 *   closes every 3 to 5 s).
 */
import { XRPL_MAINNET_ID } from "./networks.js";
import { ConfigError } from "../../lib/configError.js";
import type { FamilyConfig } from "../ports.js";
import type { ConfigVariable } from "../../lib/envVars.js";
import type { XrplSettings, XrplSetup } from "./index.js";

interface XrplConfig {
  setup: { networks: { id: string; rpcUrl: string }[] } | undefined;
  settings: { maxFeeDrops: bigint; minLedgerCloseSeconds: number };
}

function parseXrplConfig(env: NodeJS.ProcessEnv): XrplConfig {
  const rpcUrl = env["XRPL_RPC_URL"]?.trim();
  if (rpcUrl && !/^https?:\/\//.test(rpcUrl)) {
    throw new ConfigError(
      "XRPL_RPC_URL must be rippled's JSON-RPC over http(s), e.g. https://xrplcluster.com (not ws://)",
    );
  }
  const maxFee = env["XRPL_MAX_FEE_DROPS"]?.trim() || "10000";
  if (!/^\d{1,12}$/.test(maxFee) || BigInt(maxFee) < 10n) {
    throw new ConfigError("XRPL_MAX_FEE_DROPS must be a whole number of drops, at least 10");
  }
  const closeRaw = env["XRPL_MIN_LEDGER_CLOSE_SECONDS"]?.trim() || "3";
  const close = Number(closeRaw);
  if (!Number.isFinite(close) || close < 0.5 || close > 60) {
    throw new ConfigError(
      "XRPL_MIN_LEDGER_CLOSE_SECONDS must be a number of seconds from 0.5 to 60",
    );
  }
  return {
    setup: rpcUrl ? { networks: [{ id: XRPL_MAINNET_ID, rpcUrl }] } : undefined,
    settings: { maxFeeDrops: BigInt(maxFee), minLedgerCloseSeconds: close },
  };
}

/**
 * The variables this family reads, for docs/configuration.md (`npm run
 * docs:config`; a test fails when one read here is missing).
 */
const VARIABLES: readonly ConfigVariable[] = [
  {
    name: "XRPL_RPC_URL",
    description:
      "rippled JSON-RPC over HTTP(S) for `xrpl:0` (not `ws://`). Alone it serves the XRP Ledger (keyless: no keys to set). Point it at a node that keeps at least the last 1,000 ledgers, or an expired payment stays `settlement_pending`.",
    example: "XRPL_RPC_URL=https://xrplcluster.com",
  },
  {
    name: "XRPL_MAX_FEE_DROPS",
    default: "`10000` (0.01 XRP)",
    description:
      "Highest fee (drops, at least 10) a payment may carry; above it the payment is refused.",
  },
  {
    name: "XRPL_MIN_LEDGER_CLOSE_SECONDS",
    default: "`3`",
    description:
      "Fastest ledger close assumed (0.5 to 60 s) when bounding `LastLedgerSequence` by `maxTimeoutSeconds`; mainnet closes every 3 to 5 s.",
  },
];

export const xrplConfig: FamilyConfig<XrplSetup, XrplSettings> = {
  present: (env) => !!env["XRPL_RPC_URL"],
  hint: "XRPL_RPC_URL",
  variables: VARIABLES,
  parse: (env) => {
    const { setup, settings } = parseXrplConfig(env);
    return setup ? { setup, settings } : { settings };
  },
};
