/**
 * The XRP Ledger family's configuration, from the environment:
 *
 * - `XRPL_RPC_URL`: a rippled JSON-RPC URL over HTTP(S) (serves `xrpl:0`).
 *   The model is keyless, so no keys: the payer signs and pays its own fee.
 * - `XRPL_WS_URL`: rippled's WebSocket, where the `ledger` stream says the
 *   moment a ledger is validated, so a settle answers then instead of at its
 *   next poll. Unset: the RPC URL's host and port over `ws(s)://`; `off`:
 *   poll only. While the stream is down the service polls.
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
  setup: { networks: { id: string; rpcUrl: string; wsUrl?: string | null }[] } | undefined;
  settings: { maxFeeDrops: bigint; minLedgerCloseSeconds: number };
}

function parseXrplConfig(env: NodeJS.ProcessEnv): XrplConfig {
  const rpcUrl = env["XRPL_RPC_URL"]?.trim();
  if (rpcUrl && !/^https?:\/\//.test(rpcUrl)) {
    throw new ConfigError(
      "XRPL_RPC_URL must be rippled's JSON-RPC over http(s), e.g. https://xrplcluster.com (not ws://)",
    );
  }
  const wsRaw = env["XRPL_WS_URL"]?.trim();
  if (wsRaw && wsRaw !== "off" && !/^wss?:\/\//.test(wsRaw)) {
    throw new ConfigError(
      "XRPL_WS_URL must be rippled's WebSocket (ws:// or wss://), or `off` to poll only",
    );
  }
  const wsUrl = wsRaw === "off" ? null : wsRaw || undefined;
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
    setup: rpcUrl
      ? {
          networks: [{ id: XRPL_MAINNET_ID, rpcUrl, ...(wsUrl !== undefined ? { wsUrl } : {}) }],
        }
      : undefined,
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
    name: "XRPL_WS_URL",
    default: "the `XRPL_RPC_URL` host and port over `ws://` (`wss://` for `https://`)",
    description:
      "rippled WebSocket for `xrpl:0`, whose `ledger` stream announces each validated ledger so a settle answers as soon as its ledger closes. `off` polls only. While the stream is unreachable the service polls the JSON-RPC URL and reconnects in the background.",
    example: "XRPL_WS_URL=wss://xrplcluster.com",
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
