/**
 * What the service is given to serve the local Starknet: the one
 * "running ledger → service setup" mapping the devnet, the test stack and
 * the benchmarks share, so a change to the family's setup is made once.
 */
import type { ChainSetups } from "../../src/chains/index.js";
import { STARKNET_MAINNET, type RunningStarknet } from "./index.js";

export const starknetService = {
  namespace: "starknet",
  network: STARKNET_MAINNET,
  /** The setup entry; `rpcUrl` replaces the node's own (a proxy in tests). */
  setup: (running: RunningStarknet, rpcUrl = running.info.rpcUrl): ChainSetups => ({
    starknet: { networks: [{ id: STARKNET_MAINNET, rpcUrl }], executors: running.executors },
  }),
  /** The same as production configuration variables (a service started on its own). */
  env: (running: RunningStarknet): Record<string, string> => ({
    STARKNET_RPC_URL: running.info.rpcUrl,
    STARKNET_EXECUTOR_KEYS: running.executors.map((e) => `${e.address}:${e.privateKey}`).join(","),
  }),
  banner: (running: RunningStarknet) => `${running.info.rpcUrl}   USDC ${running.info.assets.USDC}`,
} as const;
