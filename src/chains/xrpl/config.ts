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

export const xrplConfig: FamilyConfig<XrplSetup, XrplSettings> = {
  present: (env) => !!env["XRPL_RPC_URL"],
  hint: "XRPL_RPC_URL",
  parse: (env) => {
    const { setup, settings } = parseXrplConfig(env);
    return setup ? { setup, settings } : { settings };
  },
};
