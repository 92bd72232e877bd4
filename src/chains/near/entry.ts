/**
 * The NEAR family as the service knows it before loading it: its networks,
 * its configuration, and how to build it (index.ts, with `@near-js/*`,
 * loaded only when a NEAR network is served).
 */
import type { FamilyEntry } from "../ports.js";
import { nearConfig } from "./config.js";
import type { NearSettings, NearSetup } from "./index.js";
import { NEAR_NETWORKS } from "./networks.js";

export const nearFamily: FamilyEntry<NearSetup, NearSettings> = {
  namespace: "near",
  label: "NEAR",
  networks: NEAR_NETWORKS.map((n) => ({
    id: n.id,
    name: n.name,
    schemes: n.schemes,
    assets: n.assets.map((a) => ({ id: a.contract, symbol: a.symbol, decimals: a.decimals })),
    explorerTx: n.explorerTx,
    native: { symbol: "NEAR", decimals: 24 },
  })),
  config: nearConfig,
  async exactServerScheme() {
    const { ExactNearServerScheme } = await import("./clients/exactServer.js");
    return new ExactNearServerScheme();
  },
  async load() {
    const { createNear } = await import("./index.js");
    return async (setup, settings, ctx) => createNear(setup, settings, ctx);
  },
};
