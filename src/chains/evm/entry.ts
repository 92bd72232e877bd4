/**
 * The EVM family as the service knows it before loading it: its networks,
 * its configuration and how to build it (createEvm.ts, loaded on demand).
 */
import type { FamilyEntry } from "../ports.js";
import { evmConfig, type EvmSettings, type EvmSetup } from "./config.js";
import { EVM_NETWORKS } from "./networks.js";

export const evmFamily: FamilyEntry<EvmSetup, EvmSettings> = {
  namespace: "eip155",
  label: "EVM",
  networks: EVM_NETWORKS.map((n) => ({
    id: n.id,
    name: n.name,
    schemes: n.schemes,
    assets: n.assets.map((a) => ({ id: a.address, symbol: a.symbol, decimals: a.decimals })),
    ...(n.explorerTx ? { explorerTx: n.explorerTx } : {}),
  })),
  assetKey: (id) => id.toLowerCase(),
  config: evmConfig,
  async load() {
    const { createEvm } = await import("./createEvm.js");
    return createEvm;
  },
  // Signature recovery and typed-data hashing are the CPU of a verification.
  async confidentialVault() {
    const { createConfidentialVault } = await import("./confidential/vault.js");
    return createConfidentialVault;
  },
  verifyThreads: (settings) => ({
    count: settings.verifyThreads,
    startAtPerSecond: settings.verifyThreadsAbove,
  }),
};
