/**
 * NEAR `exact` for resource servers using `@x402/core`'s
 * `x402ResourceServer`: a dollar price (`"$0.01"`) is asked in USDC (6
 * decimals, atomic units); an `{ amount, asset }` price (atomic units of any
 * NEP-141 token contract) passes through. The payTo account must be
 * registered with the token (`storage_deposit`).
 */
import type { Network } from "@x402/core/types";
import { NEAR_USDC } from "../networks.js";
import { ExactServerScheme, type DollarAsset } from "../../exactServerScheme.js";

export class ExactNearServerScheme extends ExactServerScheme {
  protected dollarAsset(): DollarAsset {
    return { asset: NEAR_USDC, decimals: 6 };
  }

  getAssetDecimals(asset: string, _network: Network): number | undefined {
    return asset === NEAR_USDC ? 6 : undefined;
  }
}
