/**
 * The Solana family as the tests build it: on one RPC URL, with settings a
 * local ledger allows and a context that records nothing, each part
 * overridable where a test needs its own.
 */
import type { FamilyContext } from "../../../src/chains/ports.js";
import { noopJournal } from "../../../src/chains/ports.js";
import {
  createSvm,
  type SvmChainAdapter,
  type SvmSettings,
} from "../../../src/chains/svm/index.js";
import { createLogger } from "../../../src/lib/logger.js";

export const SOLANA_NETWORK = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp";

export function testSvmFamily(opts: {
  rpcUrl: string;
  secretKeys: readonly string[];
  settings?: Partial<SvmSettings>;
  context?: Partial<FamilyContext>;
}): Promise<SvmChainAdapter> {
  return createSvm(
    { networks: [{ id: SOLANA_NETWORK, rpcUrl: opts.rpcUrl }], secretKeys: opts.secretKeys },
    {
      commitment: "confirmed",
      maxComputeUnits: 200_000,
      maxPriorityFeeMicroLamports: 50_000,
      minFeePayerLamports: 1n,
      ...opts.settings,
    },
    {
      log: createLogger("silent"),
      journal: noopJournal,
      leases: { port: { sync: async () => [], releaseAll: async () => {} }, holder: "t" },
      settleTimeoutMs: 5_000,
      onSignerHealth: () => {},
      pollingIntervalMs: 50,
      ...opts.context,
    },
  );
}
