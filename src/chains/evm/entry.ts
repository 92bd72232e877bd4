/**
 * The EVM family as the service knows it before loading it: its networks,
 * its configuration and how to build it (createEvm.ts, loaded on demand).
 */
import type { FamilyEntry } from "../ports.js";
import { evmConfig, type EvmSettings, type EvmSetup } from "./config.js";
import { EVM_NETWORKS } from "./networks.js";

const ETH = { symbol: "ETH", decimals: 18 };
/**
 * Each chain's native token, which pays its gas (fees are stored in wei).
 * The USDG chain (4663) is left out: its gas token is not known here.
 */
const NATIVE: Readonly<Record<number, { symbol: string; decimals: number }>> = {
  8453: ETH,
  42161: ETH,
  10: ETH,
  59144: ETH,
  130: ETH,
  480: ETH,
  137: { symbol: "POL", decimals: 18 },
  43114: { symbol: "AVAX", decimals: 18 },
  42220: { symbol: "CELO", decimals: 18 },
  143: { symbol: "MON", decimals: 18 },
};

export const evmFamily: FamilyEntry<EvmSetup, EvmSettings> = {
  namespace: "eip155",
  label: "EVM",
  networks: EVM_NETWORKS.map((n) => ({
    id: n.id,
    name: n.name,
    schemes: n.schemes,
    assets: n.assets.map((a) => ({ id: a.address, symbol: a.symbol, decimals: a.decimals })),
    ...(n.explorerTx ? { explorerTx: n.explorerTx } : {}),
    ...(NATIVE[n.chainId] ? { native: NATIVE[n.chainId] } : {}),
  })),
  assetKey: (id) => id.toLowerCase(),
  hexAddresses: true,
  config: evmConfig,
  async exactServerScheme() {
    const { ExactEvmScheme } = await import("@x402/evm/exact/server");
    return new ExactEvmScheme();
  },
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
