/**
 * The devnet's local ledger of each chain family other than EVM (whose anvil
 * chains `devnet/evm/index.ts` starts together): how to start it, what the
 * service is given to serve it (devnet/<family>/service.ts, which the test
 * stack and the benchmarks use too), and its line in the start-up banner.
 * One entry per family; a new family's devnet is its folder and one entry here.
 */
import type { ChainSetups } from "../src/chains/index.js";
import { startSolanaDevnet } from "./svm/index.js";
import { solanaService } from "./svm/service.js";
import { startXrplLedger } from "./xrpl/index.js";
import { xrplService } from "./xrpl/service.js";
import { startNearLedger } from "./near/index.js";
import { nearService } from "./near/service.js";
import { startStarknetLedger } from "./starknet/index.js";
import { starknetService } from "./starknet/service.js";

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

/** A family's mapping from its running ledger to the service (devnet/<family>/service.ts). */
interface ServiceMapping<R> {
  network: string;
  setup(running: R): ChainSetups;
  banner(running: R): string;
}

/** A started ledger, through its family's mapping. */
function running<R extends { info: object; stop(): Promise<unknown> }>(
  mapping: ServiceMapping<R>,
  ledger: R,
): RunningLedger {
  return {
    network: mapping.network,
    info: ledger.info,
    setup: mapping.setup(ledger),
    banner: mapping.banner(ledger),
    stop: () => ledger.stop(),
  };
}

export interface DevnetLedger {
  network: string;
  /** What starts, for the progress line. */
  what: string;
  start(): Promise<RunningLedger>;
}

export const DEVNET_LEDGERS: readonly DevnetLedger[] = [
  {
    network: solanaService.network,
    what: "the local Solana ledger (LiteSVM)",
    start: async () => running(solanaService, await startSolanaDevnet({})),
  },
  {
    network: xrplService.network,
    what: "the local XRP Ledger (a ledger close every second)",
    start: async () => running(xrplService, await startXrplLedger({})),
  },
  {
    network: nearService.network,
    what: "the local NEAR chain (a block every second)",
    start: async () => running(nearService, await startNearLedger({})),
  },
  {
    network: starknetService.network,
    what: "the local Starknet (a block every second)",
    start: async () => running(starknetService, await startStarknetLedger({})),
  },
];
