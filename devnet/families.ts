/**
 * The devnet's local ledger of each chain family other than EVM (whose anvil
 * chains `devnet/index.ts` starts together): how to start it, what the
 * service is given to serve it, and its line in the start-up banner. One
 * entry per family; a new family's devnet is its folder and one line here.
 */
import type { ChainSetups } from "../src/chains/index.js";
import { SOLANA_MAINNET, startSolanaDevnet } from "./svm/index.js";
import { XRPL_MAINNET, startXrplLedger } from "./xrpl/index.js";
import { NEAR_MAINNET, startNearLedger } from "./near/index.js";
import { STARKNET_MAINNET, startStarknetLedger } from "./starknet/index.js";

/** A started ledger, as the devnet boot keeps it. */
export interface RunningLedger {
  network: string;
  /** What `.devnet/devnet.json` holds under `networks[network]`. */
  info: object;
  /** The service's setup for this family. */
  setup: ChainSetups;
  /** Its line in the banner: the RPC URL and the assets. */
  banner: string;
  stop(): Promise<unknown>;
}

export interface DevnetLedger {
  network: string;
  /** What starts, for the progress line. */
  what: string;
  start(): Promise<RunningLedger>;
}

export const DEVNET_LEDGERS: readonly DevnetLedger[] = [
  {
    network: SOLANA_MAINNET,
    what: "the local Solana ledger (LiteSVM)",
    async start() {
      const running = await startSolanaDevnet({});
      const { info } = running;
      return {
        network: SOLANA_MAINNET,
        info,
        setup: {
          solana: {
            networks: [{ id: SOLANA_MAINNET, rpcUrl: info.rpcUrl }],
            secretKeys: info.facilitatorSecretKeys,
          },
        },
        banner: `${info.rpcUrl}   USDC ${info.assets.USDC}`,
        stop: () => running.stop(),
      };
    },
  },
  {
    network: XRPL_MAINNET,
    what: "the local XRP Ledger (a ledger close every second)",
    async start() {
      const running = await startXrplLedger({});
      const { info } = running;
      return {
        network: XRPL_MAINNET,
        info,
        setup: { xrpl: { networks: [{ id: XRPL_MAINNET, rpcUrl: info.rpcUrl }] } },
        banner: `${info.wsUrl}   XRP, RLUSD ${info.issuers.RLUSD}`,
        stop: () => running.stop(),
      };
    },
  },
  {
    network: NEAR_MAINNET,
    what: "the local NEAR chain (a block every second)",
    async start() {
      const running = await startNearLedger({});
      const { info } = running;
      return {
        network: NEAR_MAINNET,
        info,
        setup: {
          near: {
            networks: [{ id: NEAR_MAINNET, rpcUrl: info.rpcUrl }],
            relayerKeys: info.relayers.map((r) => `${r.accountId}:${r.secretKey}`),
          },
        },
        banner: `${info.rpcUrl}   USDC ${info.assets.USDC}`,
        stop: () => running.stop(),
      };
    },
  },
  {
    network: STARKNET_MAINNET,
    what: "the local Starknet (a block every second)",
    async start() {
      const running = await startStarknetLedger({});
      const { info } = running;
      return {
        network: STARKNET_MAINNET,
        info,
        setup: {
          starknet: {
            networks: [{ id: STARKNET_MAINNET, rpcUrl: info.rpcUrl }],
            executors: running.executors,
          },
        },
        banner: `${info.rpcUrl}   USDC ${info.assets.USDC}`,
        stop: () => running.stop(),
      };
    },
  },
];
