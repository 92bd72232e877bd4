/**
 * What the dashboard needs to show an amount in token units and link a
 * transaction: each (network, asset)'s symbol and decimals, and each
 * network's block explorer. The registries name the mainnet tokens; the
 * devnet adds its own token copies through `extra`.
 */
import { EVM_NETWORKS } from "../../networks/registry.js";
import { SVM_NETWORKS } from "../../networks/svm.js";
import { XRPL_NETWORKS } from "../../networks/xrpl.js";

export interface KnownAsset {
  network: string;
  address: string;
  symbol: string;
  decimals: number;
}

/** Mainnet explorers of the EVM networks (the registry holds chains, not explorers). */
const EVM_EXPLORERS: Record<number, string> = {
  8453: "https://basescan.org/tx/{tx}",
  42161: "https://arbiscan.io/tx/{tx}",
  10: "https://optimistic.etherscan.io/tx/{tx}",
  137: "https://polygonscan.com/tx/{tx}",
  43114: "https://snowtrace.io/tx/{tx}",
  42220: "https://celoscan.io/tx/{tx}",
  59144: "https://lineascan.build/tx/{tx}",
  130: "https://uniscan.xyz/tx/{tx}",
  480: "https://worldscan.org/tx/{tx}",
  143: "https://monadscan.com/tx/{tx}",
};

export class AssetCatalog {
  private readonly assets = new Map<string, KnownAsset>();
  private readonly explorers = new Map<string, string>();

  /** `explorers: false` (devnet): local chains have no public explorer. */
  constructor(extra: readonly KnownAsset[] = [], opts: { explorers?: boolean } = {}) {
    for (const n of EVM_NETWORKS) {
      for (const a of n.assets) this.add({ network: n.id, ...a });
      const explorer = EVM_EXPLORERS[n.chainId];
      if (explorer) this.explorers.set(n.id, explorer);
    }
    for (const n of SVM_NETWORKS) {
      this.explorers.set(n.id, n.explorerTx);
      for (const a of assetsOf(n)) this.add({ network: n.id, ...a });
    }
    for (const n of XRPL_NETWORKS) {
      this.explorers.set(n.id, n.explorerTx);
      for (const a of assetsOf(n)) this.add({ network: n.id, ...a });
    }
    for (const a of extra) this.add(a);
    if (opts.explorers === false) this.explorers.clear();
  }

  describe(network: string, asset: string): { symbol: string; decimals: number } | undefined {
    return this.assets.get(key(network, asset));
  }

  explorerUrl(network: string, transaction: string | null): string | null {
    const template = this.explorers.get(network);
    return template && transaction
      ? template.replace("{tx}", encodeURIComponent(transaction))
      : null;
  }

  private add(a: KnownAsset): void {
    this.assets.set(key(a.network, a.address), a);
  }
}

const key = (network: string, asset: string) =>
  `${network}|${network.startsWith("eip155:") ? asset.toLowerCase() : asset}`;

/** The assets of a non-EVM registry entry, read loosely: their shapes differ per family. */
function assetsOf(n: object): { address: string; symbol: string; decimals: number }[] {
  const list = (n as { assets?: unknown }).assets;
  if (!Array.isArray(list)) return [];
  return list.flatMap((a: Record<string, unknown>) => {
    const address = a["address"] ?? a["mint"] ?? a["asset"];
    return typeof address === "string" &&
      typeof a["symbol"] === "string" &&
      typeof a["decimals"] === "number"
      ? [{ address, symbol: a["symbol"], decimals: a["decimals"] }]
      : [];
  });
}

/** An atomic amount as token units, exactly (no floating point): "1500000", 6 → "1.5". */
export function toTokenUnits(atomic: string, decimals: number): string {
  if (!/^\d+$/.test(atomic) || decimals === 0) return atomic;
  const padded = atomic.padStart(decimals + 1, "0");
  const whole = padded.slice(0, -decimals);
  const fraction = padded.slice(-decimals).replace(/0+$/, "");
  return fraction ? `${whole}.${fraction}` : whole;
}
