/**
 * The local Starknet's devnet descriptor: how it starts, and what the
 * service is given to serve it: the one "running ledger → service setup"
 * mapping the devnet, the test stack and the benchmarks share, so a change
 * to the family's setup is made once.
 */
import type { DevnetFamily } from "../family.js";
import {
  STARKNET_MAINNET,
  startStarknetLedger,
  type RunningStarknet,
  type StarknetDevnetOptions,
} from "./index.js";

/** The same as production configuration variables (a service started on its own). */
const env = (
  running: Pick<RunningStarknet, "info" | "executors">,
  rpcUrl = running.info.rpcUrl,
): Record<string, string> => ({
  STARKNET_RPC_URL: rpcUrl,
  STARKNET_EXECUTOR_KEYS: running.executors.map((e) => `${e.address}:${e.privateKey}`).join(","),
});

export const starknetService = {
  namespace: "starknet",
  network: STARKNET_MAINNET,
  what: "the local Starknet (a block every second)",
  start: startStarknetLedger,
  quick: { blockMs: 200 },
  setup: (running, rpcUrl = running.info.rpcUrl) => ({
    starknet: { networks: [{ id: STARKNET_MAINNET, rpcUrl }], executors: running.executors },
  }),
  env,
  banner: (running) => `${running.info.rpcUrl}   USDC ${running.info.assets.USDC}`,
  bench: async (payers, blockMs) =>
    (await import("./bench.js")).starknetBench(payers, blockMs, env),
} satisfies DevnetFamily<RunningStarknet, StarknetDevnetOptions>;
