/**
 * The Solana family as the service knows it before loading it: its
 * networks, its configuration, and how to build it (index.ts, with
 * `@solana/kit`, loaded only when a Solana network is served).
 */
import type { FamilyEntry } from "../ports.js";
import { svmConfig } from "./config.js";
import type { SvmSettings, SvmSetup } from "./index.js";
import { SVM_NETWORKS } from "./networks.js";

export const svmFamily: FamilyEntry<SvmSetup, SvmSettings> = {
  namespace: "solana",
  label: "Solana",
  networks: SVM_NETWORKS.map((n) => ({
    id: n.id,
    name: n.name,
    schemes: n.schemes,
    assets: n.assets.map((a) => ({ id: a.mint, symbol: a.symbol, decimals: a.decimals })),
    explorerTx: n.explorerTx,
    native: { symbol: "SOL", decimals: 9 },
  })),
  config: svmConfig,
  async exactServerScheme() {
    const { ExactSvmScheme } = await import("@x402/svm/exact/server");
    return new ExactSvmScheme();
  },
  async load() {
    const { createSvm } = await import("./index.js");
    return createSvm;
  },
};
