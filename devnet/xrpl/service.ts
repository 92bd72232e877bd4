/**
 * The local XRP Ledger's devnet descriptor: how it starts, and what the
 * service is given to serve it: the one "running ledger → service setup"
 * mapping the devnet, the test stack and the benchmarks share, so a change
 * to the family's setup is made once.
 */
import type { DevnetFamily } from "../family.js";
import {
  XRPL_MAINNET,
  startXrplLedger,
  type RunningXrpl,
  type XrplDevnetOptions,
} from "./index.js";

/** The same as production configuration variables (a service started on its own). */
const env = (
  running: Pick<RunningXrpl, "info">,
  rpcUrl = running.info.rpcUrl,
): Record<string, string> => ({
  XRPL_RPC_URL: rpcUrl,
});

export const xrplService = {
  namespace: "xrpl",
  network: XRPL_MAINNET,
  what: "the local XRP Ledger (a ledger close every second)",
  start: startXrplLedger,
  quick: { closeMs: 1000 },
  setup: (running, rpcUrl = running.info.rpcUrl) => ({
    xrpl: { networks: [{ id: XRPL_MAINNET, rpcUrl }] },
  }),
  env,
  banner: (running) => `${running.info.wsUrl}   XRP, RLUSD ${running.info.issuers.RLUSD}`,
  bench: async (payers, blockMs) => (await import("./bench.js")).xrplBench(payers, blockMs, env),
} satisfies DevnetFamily<RunningXrpl, XrplDevnetOptions>;
