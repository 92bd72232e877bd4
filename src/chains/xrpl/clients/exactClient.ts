/**
 * Paying with XRPL `exact`, for the customers of a resource server (no
 * official XRPL client is published): an `@x402/core` client scheme that
 * builds the `Payment` a requirement asks for, lets the `xrpl` package fill
 * in the sequence and fee, signs it with the payer's wallet, and sends the
 * blob as `payload.signedTxBlob`.
 *
 *   const client = new x402Client().register("xrpl:*",
 *     new ExactXrplClientScheme(Wallet.fromSeed(seed), { wsUrl: "wss://xrplcluster.com" }));
 *
 * The invoice, when the requirements name one, is bound both ways existing
 * facilitators read it: `InvoiceID` = SHA-256 of it, and a memo carrying it.
 */
import { createHash } from "node:crypto";
import { Client, type Payment, type Wallet } from "xrpl";
import type {
  DefaultAsset,
  PaymentPayloadResult,
  PaymentRequirements,
  SchemeNetworkClient,
} from "@x402/core/types";
import { RLUSD_CURRENCY } from "../networks.js";

export interface ExactXrplClientOptions {
  /** A rippled WebSocket URL (`wss://…`); or pass a connected `client`. */
  wsUrl?: string;
  client?: Client;
}

/** Ledgers a payment may wait: what `maxTimeoutSeconds` allows at 5 s a ledger, at most 20. */
export function ledgersAhead(maxTimeoutSeconds: number): number {
  return Math.min(20, Math.ceil(maxTimeoutSeconds / 5) + 2);
}

/** The unsigned `Payment` for a requirement. */
export function paymentFor(account: string, requirements: PaymentRequirements): Payment {
  const extra = requirements.extra ?? {};
  const issuer = extra["issuer"];
  const amount =
    requirements.asset === "XRP"
      ? requirements.amount
      : { currency: requirements.asset, issuer: String(issuer), value: requirements.amount };
  const invoiceId = typeof extra["invoiceId"] === "string" ? extra["invoiceId"] : undefined;
  return {
    TransactionType: "Payment",
    Account: account,
    Destination: requirements.payTo,
    Amount: amount,
    ...(extra["destinationTag"] !== undefined
      ? { DestinationTag: Number(extra["destinationTag"]) }
      : {}),
    ...(invoiceId
      ? {
          InvoiceID: createHash("sha256").update(invoiceId).digest("hex").toUpperCase(),
          Memos: [
            { Memo: { MemoData: Buffer.from(invoiceId, "utf8").toString("hex").toUpperCase() } },
          ],
        }
      : {}),
  };
}

/**
 * RLUSD is a dollar stablecoin, so `x402Client`'s dollar spend cap applies
 * to it. XRP is not: a payer allows it explicitly, with a cap in drops
 * (`spendControls.allowedAssets: [{ network: "xrpl:0", asset: "XRP", maxAmountPerPayment: "…" }]`).
 */
export function findXrplDefaultAsset(asset: string, network: string): DefaultAsset | undefined {
  if (!network.startsWith("xrpl:")) return undefined;
  return asset === RLUSD_CURRENCY ? { asset, decimals: 15, symbol: "RLUSD" } : undefined;
}

export class ExactXrplClientScheme implements SchemeNetworkClient {
  readonly scheme = "exact";
  readonly findDefaultAsset = findXrplDefaultAsset;

  constructor(
    private readonly wallet: Wallet,
    private readonly options: ExactXrplClientOptions,
  ) {
    if (!options.client && !options.wsUrl)
      throw new Error("ExactXrplClientScheme needs wsUrl or client");
  }

  async createPaymentPayload(
    x402Version: number,
    requirements: PaymentRequirements,
  ): Promise<PaymentPayloadResult> {
    const own = this.options.client ? undefined : new Client(this.options.wsUrl!);
    const client = this.options.client ?? own!;
    try {
      if (!client.isConnected()) await client.connect();
      const validated = await client.getLedgerIndex();
      const tx = await client.autofill({
        ...paymentFor(this.wallet.classicAddress, requirements),
        LastLedgerSequence: validated + ledgersAhead(requirements.maxTimeoutSeconds),
      });
      return { x402Version, payload: { signedTxBlob: this.wallet.sign(tx).tx_blob } };
    } finally {
      await own?.disconnect();
    }
  }
}
