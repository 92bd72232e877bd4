/**
 * The XRP Ledger family as the service knows it before loading it: its
 * networks, its configuration, and how to build it (index.ts, with `xrpl`,
 * loaded only when an XRPL network is served).
 */
import type { FamilyEntry } from "../ports.js";
import { xrplConfig } from "./config.js";
import type { XrplSettings, XrplSetup } from "./index.js";
import { XRPL_NETWORKS } from "./networks.js";

export const xrplFamily: FamilyEntry<XrplSetup, XrplSettings> = {
  namespace: "xrpl",
  label: "XRP Ledger",
  networks: XRPL_NETWORKS.map((n) => ({
    id: n.id,
    name: n.name,
    schemes: n.schemes,
    // Requirements name XRP by its code and an issued currency by its currency code.
    assets: n.assets.map((a) => ({
      id: a.kind === "native" ? "XRP" : a.currency,
      symbol: a.symbol,
      decimals: a.decimals,
    })),
    explorerTx: n.explorerTx,
    native: { symbol: "XRP", decimals: 6 },
  })),
  config: xrplConfig,
  async exactServerScheme() {
    const { ExactXrplServerScheme } = await import("./clients/exactServer.js");
    return new ExactXrplServerScheme();
  },
  async load() {
    const { createXrpl } = await import("./index.js");
    return async (setup, settings, ctx) => createXrpl(setup, settings, ctx);
  },
};
