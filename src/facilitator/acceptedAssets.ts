/**
 * The assets this service settles on each network: the ones the chain
 * families list (USDC, USDG, XRP and RLUSD, the NEP-141 and Starknet USDC),
 * plus any the operator adds (`EXTRA_ASSETS`). Anything else is refused
 * with `unsupported_asset` before a chain is asked: a token's code runs
 * inside our signers' transactions, so only a token someone vouched for may.
 */
import type { NetworkDescription } from "../chains/ports.js";
import type { Refusal } from "../protocol/answers.js";
import { Reason } from "../protocol/reasons.js";

export interface ListedAsset {
  asset: string;
  symbol: string;
  decimals: number;
}

export class AcceptedAssets {
  private readonly byNetwork = new Map<string, Map<string, ListedAsset>>();

  constructor(
    networks: readonly NetworkDescription[],
    /** The one spelling of an asset id on a network, for comparing. */
    private readonly keyOf: (network: string, asset: string) => string,
  ) {
    for (const n of networks) {
      const listed = this.byNetwork.get(n.id) ?? new Map<string, ListedAsset>();
      for (const a of n.assets) {
        listed.set(keyOf(n.id, a.id), { asset: a.id, symbol: a.symbol, decimals: a.decimals });
      }
      this.byNetwork.set(n.id, listed);
    }
  }

  /** The refusal of a payment in an asset not settled on its network, or undefined. */
  refusal(network: string, asset: string): Omit<Refusal, "ok"> | undefined {
    const listed = this.byNetwork.get(network);
    if (!listed || listed.has(this.keyOf(network, asset))) return undefined;
    const offered = [...listed.values()].map((a) => `${a.symbol} (${a.asset})`).join(", ");
    return {
      reason: Reason.unsupportedAsset,
      message: `paymentRequirements.asset ${asset} is not settled on ${network}; it takes ${offered || "no asset"} (see GET /supported)`,
    };
  }

  /** What each of `networks` takes, for GET /supported. */
  listed(networks: readonly string[]): Record<string, ListedAsset[]> {
    return Object.fromEntries(
      networks.map((n) => [n, [...(this.byNetwork.get(n)?.values() ?? [])]]),
    );
  }
}
