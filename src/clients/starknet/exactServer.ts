/**
 * Starknet `exact` for resource servers using `@x402/core`'s
 * `x402ResourceServer`: turns a route's price into requirements. A dollar
 * price (`"$0.01"`) is asked in USDC (6 decimals, atomic units); an
 * `{ amount, asset }` price passes through. `extra.feePayer`, which the
 * payer must bind as its `Caller`, is copied from the facilitator's
 * `/supported` entry.
 */
import type {
  AssetAmount,
  Network,
  PaymentRequirements,
  Price,
  SchemeNetworkServer,
  SupportedKind,
} from "@x402/core/types";
import { findStarknetNetwork } from "../../networks/starknet.js";

export class ExactStarknetServerScheme implements SchemeNetworkServer {
  readonly scheme = "exact";
  readonly defaultAssetTransferMethod = "default";
  readonly paymentFlows = {
    default: { supported: ["authorization"], default: "authorization" },
  } as const;

  async parsePrice(price: Price, network: Network): Promise<AssetAmount> {
    if (typeof price === "object") return price;
    const usdc = findStarknetNetwork(network)?.assets.find((a) => a.symbol === "USDC");
    const m = /^\$?(\d{1,12})(?:\.(\d{1,6}))?$/.exec(String(price).trim());
    if (!usdc || !m) {
      throw new Error(
        `price ${String(price)} on ${network} must be a dollar amount with at most 6 decimals, e.g. "$0.01"`,
      );
    }
    const amount = BigInt(m[1]!) * 1_000_000n + BigInt((m[2] ?? "").padEnd(6, "0"));
    if (amount === 0n) throw new Error(`price ${String(price)} on ${network} must be positive`);
    return { amount: amount.toString(), asset: usdc.address };
  }

  getAssetDecimals(asset: string, network: Network): number | undefined {
    return findStarknetNetwork(network)?.assets.find((a) => BigInt(a.address) === BigInt(asset))
      ?.decimals;
  }

  async enhancePaymentRequirements(
    requirements: PaymentRequirements,
    kind: SupportedKind,
  ): Promise<PaymentRequirements> {
    return { ...requirements, extra: { ...kind.extra, ...requirements.extra } };
  }
}
