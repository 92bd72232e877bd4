/**
 * What the dashboard needs to show an amount in token units and link a
 * transaction: each (network, asset)'s symbol and decimals, each network's
 * native token (what fees are paid in) and block explorer, from the descriptions the chain families give
 * (and the devnet's own token copies beside them). Asset ids are compared in
 * the family's one spelling (`assetKey`): EVM addresses without case,
 * Starknet felts without padding.
 */
import type { NetworkDescription } from "../../chains/ports.js";

export class AssetCatalog {
  private readonly assets = new Map<string, { symbol: string; decimals: number }>();
  private readonly explorers = new Map<string, string>();
  private readonly natives = new Map<string, { symbol: string; decimals: number }>();

  /** `explorers: false` (devnet): local chains have no public explorer. */
  constructor(
    networks: readonly NetworkDescription[],
    private readonly assetKey: (network: string, id: string) => string = (_n, id) => id,
    opts: { explorers?: boolean } = {},
  ) {
    for (const n of networks) {
      if (n.explorerTx && opts.explorers !== false) this.explorers.set(n.id, n.explorerTx);
      // A network may be described more than once (the operator's extra assets).
      if (n.native && !this.natives.has(n.id)) this.natives.set(n.id, { ...n.native });
      for (const a of n.assets) {
        this.assets.set(this.key(n.id, a.id), { symbol: a.symbol, decimals: a.decimals });
      }
    }
  }

  describe(network: string, asset: string): { symbol: string; decimals: number } | undefined {
    return this.assets.get(this.key(network, asset));
  }

  /** The network's native token (what its transactions' fees are paid in), if known. */
  native(network: string): { symbol: string; decimals: number } | undefined {
    return this.natives.get(network);
  }

  explorerUrl(network: string, transaction: string | null): string | null {
    const template = this.explorers.get(network);
    return template && transaction
      ? template.replace("{tx}", encodeURIComponent(transaction))
      : null;
  }

  private key(network: string, asset: string): string {
    return `${network}|${this.assetKey(network, asset)}`;
  }
}

/** An atomic amount as token units, exactly (no floating point): "1500000", 6 → "1.5". */
export function toTokenUnits(atomic: string, decimals: number): string {
  if (!/^\d+$/.test(atomic) || decimals === 0) return atomic;
  const padded = atomic.padStart(decimals + 1, "0");
  const whole = padded.slice(0, -decimals);
  const fraction = padded.slice(-decimals).replace(/0+$/, "");
  return fraction ? `${whole}.${fraction}` : whole;
}
