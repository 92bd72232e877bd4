/**
 * XRPL `exact` for resource servers using `@x402/core`'s
 * `x402ResourceServer`: turns a route's price into requirements. A dollar
 * price (`"$0.01"`) is asked in RLUSD; an `{ amount, asset }` price passes
 * through (`asset: "XRP"` with drops, or a currency code with
 * `extra.issuer`).
 */
import type {
  AssetAmount,
  Network,
  PaymentRequirements,
  Price,
  SchemeNetworkServer,
  SupportedKind,
} from "@x402/core/types";
import { RLUSD_CURRENCY, RLUSD_ISSUER } from "../../networks/xrpl.js";

export class ExactXrplServerScheme implements SchemeNetworkServer {
  readonly scheme = "exact";
  readonly defaultAssetTransferMethod = "default";
  readonly paymentFlows = {
    default: { supported: ["authorization"], default: "authorization" },
  } as const;

  async parsePrice(price: Price, network: Network): Promise<AssetAmount> {
    if (typeof price === "object") return price;
    const text = String(price).trim().replace(/^\$/, "");
    if (!/^\d+(\.\d+)?$/.test(text) || Number(text) <= 0) {
      throw new Error(
        `price ${String(price)} on ${network} must be a positive dollar amount, e.g. "$0.01"`,
      );
    }
    return { amount: text, asset: RLUSD_CURRENCY, extra: { issuer: RLUSD_ISSUER } };
  }

  getAssetDecimals(asset: string): number | undefined {
    return asset === "XRP" ? 6 : asset === RLUSD_CURRENCY ? 15 : undefined;
  }

  async enhancePaymentRequirements(
    requirements: PaymentRequirements,
    kind: SupportedKind,
  ): Promise<PaymentRequirements> {
    return { ...requirements, extra: { ...kind.extra, ...requirements.extra } };
  }
}
