/**
 * XRPL `exact` for resource servers using `@x402/core`'s
 * `x402ResourceServer`: turns a route's price into requirements. A dollar
 * price (`"$0.01"`) is asked in RLUSD, as a decimal value (the ledger's own
 * amounts); an `{ amount, asset }` price passes through (`asset: "XRP"` with
 * drops, or a currency code with `extra.issuer`).
 */
import type { Network } from "@x402/core/types";
import { RLUSD_CURRENCY, RLUSD_ISSUER } from "../networks.js";
import { ExactServerScheme, type DollarAsset } from "../../exactServerScheme.js";

export class ExactXrplServerScheme extends ExactServerScheme {
  protected dollarAsset(): DollarAsset {
    return {
      asset: RLUSD_CURRENCY,
      decimals: 15,
      extra: { issuer: RLUSD_ISSUER },
      decimalAmount: true,
    };
  }

  getAssetDecimals(asset: string, _network: Network): number | undefined {
    return asset === "XRP" ? 6 : asset === RLUSD_CURRENCY ? 15 : undefined;
  }
}
