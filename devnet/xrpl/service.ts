/**
 * What the service is given to serve the local XRP Ledger: the one
 * "running ledger → service setup" mapping the devnet, the test stack and
 * the benchmarks share, so a change to the family's setup is made once.
 */
import type { ChainSetups } from "../../src/chains/index.js";
import { XRPL_MAINNET, type RunningXrpl } from "./index.js";

export const xrplService = {
  namespace: "xrpl",
  network: XRPL_MAINNET,
  /** The setup entry; `rpcUrl` replaces the ledger's own (a proxy in tests). */
  setup: (running: RunningXrpl, rpcUrl = running.info.rpcUrl): ChainSetups => ({
    xrpl: { networks: [{ id: XRPL_MAINNET, rpcUrl }] },
  }),
  /** The same as production configuration variables (a service started on its own). */
  env: (running: RunningXrpl): Record<string, string> => ({ XRPL_RPC_URL: running.info.rpcUrl }),
  banner: (running: RunningXrpl) =>
    `${running.info.wsUrl}   XRP, RLUSD ${running.info.issuers.RLUSD}`,
} as const;
