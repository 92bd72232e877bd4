/**
 * What the service is given to serve the local Solana ledger: the one
 * "running ledger → service setup" mapping the devnet, the test stack and
 * the benchmarks share, so a change to the family's setup is made once.
 */
import type { ChainSetups } from "../../src/chains/index.js";
import { SOLANA_MAINNET, type RunningSolana } from "./index.js";

export const solanaService = {
  namespace: "solana",
  network: SOLANA_MAINNET,
  /** The setup entry; `rpcUrl` replaces the ledger's own (a proxy in tests). */
  setup: (running: RunningSolana, rpcUrl = running.info.rpcUrl): ChainSetups => ({
    solana: {
      networks: [{ id: SOLANA_MAINNET, rpcUrl }],
      secretKeys: running.info.facilitatorSecretKeys,
    },
  }),
  banner: (running: RunningSolana) => `${running.info.rpcUrl}   USDC ${running.info.assets.USDC}`,
} as const;
