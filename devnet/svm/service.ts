/**
 * The local Solana ledger's devnet descriptor: how it starts, and what the
 * service is given to serve it: the one "running ledger → service setup"
 * mapping the devnet, the test stack and the benchmarks share, so a change
 * to the family's setup is made once. Devnet mode runs the ledger in a
 * process of its own; tests start it in theirs, to drive it.
 */
import type { DevnetFamily } from "../family.js";
import type { SolanaLedger } from "./ledger.js";
import {
  SOLANA_MAINNET,
  startSolanaDevnet,
  startSolanaLedger,
  type RunningSolana,
  type SolanaDevnetOptions,
} from "./index.js";

export const solanaService = {
  namespace: "solana",
  network: SOLANA_MAINNET,
  what: "the local Solana ledger (LiteSVM)",
  start: startSolanaLedger,
  quick: { slotMs: 100 },
  boot: () => startSolanaDevnet({}),
  setup: (running, rpcUrl = running.info.rpcUrl) => ({
    solana: {
      networks: [{ id: SOLANA_MAINNET, rpcUrl }],
      secretKeys: running.info.facilitatorSecretKeys,
    },
  }),
  env: (running, rpcUrl = running.info.rpcUrl) => ({
    SVM_RPC_URL: rpcUrl,
    SVM_PRIVATE_KEYS: running.info.facilitatorSecretKeys.join(","),
  }),
  banner: (running) => `${running.info.rpcUrl}   USDC ${running.info.assets.USDC}`,
} satisfies DevnetFamily<
  RunningSolana,
  SolanaDevnetOptions,
  RunningSolana & { ledger: SolanaLedger }
>;
