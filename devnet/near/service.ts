/**
 * What the service is given to serve the local NEAR chain: the one
 * "running ledger → service setup" mapping the devnet, the test stack and
 * the benchmarks share, so a change to the family's setup is made once.
 */
import type { ChainSetups } from "../../src/chains/index.js";
import { NEAR_MAINNET, type RunningNear } from "./index.js";

/** The relayers as NEAR_RELAYER_KEYS lists them: `account:secret`. */
const relayerKeys = (running: RunningNear) =>
  running.info.relayers.map((r) => `${r.accountId}:${r.secretKey}`);

export const nearService = {
  namespace: "near",
  network: NEAR_MAINNET,
  /** The setup entry; `rpcUrl` replaces the chain's own (a proxy in tests). */
  setup: (running: RunningNear, rpcUrl = running.info.rpcUrl): ChainSetups => ({
    near: { networks: [{ id: NEAR_MAINNET, rpcUrl }], relayerKeys: relayerKeys(running) },
  }),
  /** The same as production configuration variables (a service started on its own). */
  env: (running: RunningNear): Record<string, string> => ({
    NEAR_RPC_URL: running.info.rpcUrl,
    NEAR_RELAYER_KEYS: relayerKeys(running).join(","),
  }),
  banner: (running: RunningNear) => `${running.info.rpcUrl}   USDC ${running.info.assets.USDC}`,
} as const;
