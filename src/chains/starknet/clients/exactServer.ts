/**
 * Starknet `exact` for resource servers using `@x402/core`'s
 * `x402ResourceServer`: a dollar price (`"$0.01"`) is asked in USDC (6
 * decimals, atomic units); an `{ amount, asset }` price passes through.
 * `extra.feePayer` (and the same executor as `extra.caller`, with
 * `areFeesSponsored: true`), which the payer must bind as its `Caller`, is
 * copied from the facilitator's `/supported` entry.
 */
import type { Network } from "@x402/core/types";
import { findStarknetNetwork } from "../networks.js";
import { ExactServerScheme, type DollarAsset } from "../../exactServerScheme.js";

export class ExactStarknetServerScheme extends ExactServerScheme {
  protected dollarAsset(network: Network): DollarAsset | undefined {
    const usdc = findStarknetNetwork(network)?.assets.find((a) => a.symbol === "USDC");
    return usdc ? { asset: usdc.address, decimals: usdc.decimals } : undefined;
  }

  getAssetDecimals(asset: string, network: Network): number | undefined {
    return findStarknetNetwork(network)?.assets.find((a) => BigInt(a.address) === BigInt(asset))
      ?.decimals;
  }
}
