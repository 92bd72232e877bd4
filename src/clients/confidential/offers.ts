/**
 * For resource servers: the 402 offers of a confidential-enabled merchant.
 *
 * Read the facilitator's `GET /confidential/status` (with your API key) and
 * turn it into the `accepts` of an `@x402/express` / `@x402/hono` route:
 * Default is the plain offer only, Confidential the private variant only,
 * Both lists the two with the confidential one first (spec 3.5). The status
 * is cached for a few seconds, so a mode chosen in the dashboard reaches
 * the next 402s without a facilitator call per request.
 */
import type { PaymentOption } from "@x402/core/http";

export type OfferMode = "default" | "confidential" | "both";

export interface ConfidentialStatus {
  available: boolean;
  network: string;
  contractAddress: string;
  configured: boolean;
  mode: OfferMode;
  enabled: boolean;
  merchantAddress: string;
}

/** The plain offer, as you would write it without confidential settlement. */
export type PlainOffer = PaymentOption;

/** The confidential twin of a plain offer: same price, paid to the contract, crediting you. */
export function confidentialOffer(status: ConfidentialStatus, plain: PlainOffer): PaymentOption {
  return {
    ...plain,
    scheme: "exact",
    network: status.network as PaymentOption["network"],
    payTo: status.contractAddress,
    extra: {
      ...plain.extra,
      confidential: true,
      merchant: status.merchantAddress,
      assetTransferMethod: "eip3009",
    },
  };
}

/** The offers for the status's mode; the plain one alone until confidential is enabled. */
export function offersFor(status: ConfidentialStatus, plain: PlainOffer): PaymentOption[] {
  if (!status.available || !status.enabled) return [plain];
  switch (status.mode) {
    case "confidential":
      return [confidentialOffer(status, plain)];
    case "both":
      return [confidentialOffer(status, plain), plain];
    default:
      return [plain];
  }
}

/** Reads and caches `GET /confidential/status`; a failed read keeps the last answer. */
export class ConfidentialStatusSource {
  private last: { at: number; status: ConfidentialStatus } | undefined;
  private inflight: Promise<ConfidentialStatus> | undefined;

  constructor(
    private readonly opts: {
      facilitatorUrl: string;
      apiKey: string;
      /** How long an answer is reused (default 5 s). */
      ttlMs?: number;
      fetch?: typeof fetch;
    },
  ) {}

  async status(): Promise<ConfidentialStatus> {
    const ttl = this.opts.ttlMs ?? 5_000;
    if (this.last && Date.now() - this.last.at < ttl) return this.last.status;
    this.inflight ??= this.read().finally(() => (this.inflight = undefined));
    try {
      return await this.inflight;
    } catch (e) {
      if (this.last) return this.last.status;
      throw e;
    }
  }

  private async read(): Promise<ConfidentialStatus> {
    const url = `${this.opts.facilitatorUrl.replace(/\/+$/, "")}/confidential/status`;
    const res = await (this.opts.fetch ?? fetch)(url, {
      headers: { "X-API-Key": this.opts.apiKey, accept: "application/json" },
    });
    if (!res.ok) {
      throw new Error(`GET /confidential/status answered ${res.status}: ${await res.text()}`);
    }
    const status = (await res.json()) as ConfidentialStatus;
    this.last = { at: Date.now(), status };
    return status;
  }
}
