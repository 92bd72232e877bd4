/**
 * The Starknet family as the service knows it before loading it: its
 * networks, its configuration, and how to build it (index.ts, with
 * `starknet`, loaded only when a Starknet network is served).
 */
import type { FamilyEntry } from "../ports.js";
import { starknetConfig } from "./config.js";
import type { StarknetSettings, StarknetSetup } from "./index.js";
import { STARKNET_NETWORKS } from "./networks.js";

export const starknetFamily: FamilyEntry<StarknetSetup, StarknetSettings> = {
  namespace: "starknet",
  label: "Starknet",
  networks: STARKNET_NETWORKS.map((n) => ({
    id: n.id,
    name: n.name,
    schemes: n.schemes,
    assets: n.assets.map((a) => ({ id: a.address, symbol: a.symbol, decimals: a.decimals })),
    explorerTx: n.explorerTx,
    // Fees are paid in STRK (v3 transactions), counted in FRI.
    native: { symbol: "STRK", decimals: 18 },
  })),
  // Felts: the same address is written with and without padding and in either case.
  assetKey: (id) => (/^0x[0-9a-fA-F]{1,64}$/.test(id) ? `0x${BigInt(id).toString(16)}` : id),
  hexAddresses: true,
  config: starknetConfig,
  async exactServerScheme() {
    const { ExactStarknetServerScheme } = await import("./clients/exactServer.js");
    return new ExactStarknetServerScheme();
  },
  async load() {
    const { createStarknet } = await import("./index.js");
    return async (setup, settings, ctx) => createStarknet(setup, settings, ctx);
  },
};
