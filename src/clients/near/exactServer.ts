/**
 * NEAR `exact` for resource servers using `@x402/core`'s
 * `x402ResourceServer`: turns a route's price into requirements. A dollar
 * price (`"$0.01"`) is asked in USDC (6 decimals); an `{ amount, asset }`
 * price (atomic units of any NEP-141 token contract) passes through. The
 * payTo account must be registered with the token (`storage_deposit`).
 */
import type {
  AssetAmount,
  Network,
  PaymentRequirements,
  Price,
  SchemeNetworkServer,
  SupportedKind,
} from "@x402/core/types";
import { NEAR_USDC } from "../../networks/near.js";

const USDC_DECIMALS = 6;

export class ExactNearServerScheme implements SchemeNetworkServer {
  readonly scheme = "exact";
  readonly defaultAssetTransferMethod = "default";
  readonly paymentFlows = {
    default: { supported: ["authorization"], default: "authorization" },
  } as const;

  async parsePrice(price: Price, network: Network): Promise<AssetAmount> {
    if (typeof price === "object") return price;
    const text = String(price).trim().replace(/^\$/, "");
    const match = /^(\d+)(?:\.(\d{1,6}))?$/.exec(text);
    if (!match || Number(text) <= 0) {
      throw new Error(
        `price ${String(price)} on ${network} must be a positive dollar amount with at most 6 decimals, e.g. "$0.01"`,
      );
    }
    const atomic =
      BigInt(match[1]!) * 10n ** BigInt(USDC_DECIMALS) +
      BigInt((match[2] ?? "").padEnd(USDC_DECIMALS, "0"));
    return { amount: atomic.toString(), asset: NEAR_USDC };
  }

  getAssetDecimals(asset: string): number | undefined {
    return asset === NEAR_USDC ? USDC_DECIMALS : undefined;
  }

  async enhancePaymentRequirements(
    requirements: PaymentRequirements,
    kind: SupportedKind,
  ): Promise<PaymentRequirements> {
    return { ...requirements, extra: { ...kind.extra, ...requirements.extra } };
  }
}
