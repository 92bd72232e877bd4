/**
 * What every `exact` server scheme of this folder shares, for resource
 * servers using `@x402/core`'s `x402ResourceServer`: one authorization flow,
 * requirements completed with the facilitator's `/supported` extra (the
 * route's own extra wins), and dollar prices turned into a stablecoin amount
 * with `@x402/core`'s money parser. A subclass names its dollar asset.
 */
import type {
  AssetAmount,
  Network,
  PaymentRequirements,
  Price,
  SchemeNetworkServer,
  SupportedKind,
} from "@x402/core/types";
import { convertToTokenAmount, parseMoney } from "@x402/core/utils";

/** The stablecoin a dollar price is asked in, on one network. */
export interface DollarAsset {
  asset: string;
  decimals: number;
  extra?: Record<string, unknown>;
  /** Issued-currency ledgers (XRPL) take decimal values, not atomic units. */
  decimalAmount?: boolean;
}

export abstract class ExactServerScheme implements SchemeNetworkServer {
  readonly scheme = "exact";
  readonly defaultAssetTransferMethod = "default";
  readonly paymentFlows = {
    default: { supported: ["authorization"], default: "authorization" },
  } as const;

  protected abstract dollarAsset(network: Network): DollarAsset | undefined;

  abstract getAssetDecimals(asset: string, network: Network): number | undefined;

  async parsePrice(price: Price, network: Network): Promise<AssetAmount> {
    if (typeof price === "object") return price;
    const target = this.dollarAsset(network);
    const refuse = (why: string) =>
      new Error(`price ${String(price)} on ${network} ${why}, e.g. "$0.01"`);
    if (!target) throw refuse("has no dollar asset here: give { amount, asset }");
    let amount: string;
    try {
      const parsed = parseMoney(price);
      if (parsed.symbol) throw new Error(parsed.symbol);
      amount = parsed.amount;
    } catch {
      throw refuse("must be a dollar amount");
    }
    const fraction = amount.split(".")[1] ?? "";
    // Never round a price: more decimals than the token has is refused.
    if (fraction.length > target.decimals) {
      throw refuse(`may have at most ${target.decimals} decimals`);
    }
    const value = target.decimalAmount ? amount : convertToTokenAmount(amount, target.decimals);
    if (!/[1-9]/.test(value)) throw refuse("must be positive");
    return { amount: value, asset: target.asset, ...(target.extra ? { extra: target.extra } : {}) };
  }

  async enhancePaymentRequirements(
    requirements: PaymentRequirements,
    kind: SupportedKind,
  ): Promise<PaymentRequirements> {
    return { ...requirements, extra: { ...kind.extra, ...requirements.extra } };
  }
}
