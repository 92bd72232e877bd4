/**
 * The local NEAR chain's devnet descriptor: how it starts, and what the
 * service is given to serve it: the one "running ledger → service setup"
 * mapping the devnet, the test stack and the benchmarks share, so a change
 * to the family's setup is made once.
 */
import type { DevnetFamily } from "../family.js";
import {
  NEAR_MAINNET,
  startNearLedger,
  type NearDevnetOptions,
  type RunningNear,
} from "./index.js";

/** The relayers as NEAR_RELAYER_KEYS lists them: `account:secret`. */
const relayerKeys = (running: RunningNear) =>
  running.info.relayers.map((r) => `${r.accountId}:${r.secretKey}`);

/** The same as production configuration variables (a service started on its own). */
const env = (running: RunningNear, rpcUrl = running.info.rpcUrl): Record<string, string> => ({
  NEAR_RPC_URL: rpcUrl,
  NEAR_RELAYER_KEYS: relayerKeys(running).join(","),
});

export const nearService = {
  namespace: "near",
  network: NEAR_MAINNET,
  what: "the local NEAR chain (a block every second)",
  start: startNearLedger,
  quick: { blockMs: 500 },
  setup: (running, rpcUrl = running.info.rpcUrl) => ({
    near: { networks: [{ id: NEAR_MAINNET, rpcUrl }], relayerKeys: relayerKeys(running) },
  }),
  env,
  banner: (running) => `${running.info.rpcUrl}   USDC ${running.info.assets.USDC}`,
  bench: async (payers, blockMs) => (await import("./bench.js")).nearBench(payers, blockMs, env),
} satisfies DevnetFamily<RunningNear, NearDevnetOptions>;
