/**
 * The upgrade path as an x402-protected resource: this service sells its
 * plans the way its customers sell their APIs.
 *
 * The official resource-server packages do the protocol: `@x402/core`'s
 * `x402HTTPResourceServer` builds the 402 (`PAYMENT-REQUIRED`, offering
 * `exact` USDC on each billing network, priced by `@x402/evm`'s exact server
 * scheme), reads `PAYMENT-SIGNATURE`, matches it to the offer, verifies and
 * settles it, and writes `PAYMENT-RESPONSE`. Its facilitator is this
 * service's own payment core, called in-process under the billing account
 * (billingAccount.ts): a billing payment is verified, settled, recorded and
 * reconciled like any other settlement.
 *
 * Around that, the money truth of billingLedger.ts: the payment's row is
 * written before it is settled and applied once after, and the same payment
 * presented again (a retry, a replay, another replica) finds its row and
 * changes nothing.
 */
import type {
  PaymentPayload,
  PaymentRequirements,
  SchemeNetworkServer,
  SettleResponse,
} from "@x402/core/types";
import type {
  FacilitatorClient,
  HTTPAdapter,
  HTTPRequestContext,
  RoutesConfig,
} from "@x402/core/server";
import {
  FacilitatorResponseError,
  x402HTTPResourceServer,
  x402ResourceServer,
} from "@x402/core/server";
import {
  decodePaymentRequiredHeader,
  decodePaymentSignatureHeader,
  encodePaymentResponseHeader,
} from "@x402/core/http";
import type { Logger } from "../../lib/logger.js";
import { ServiceError } from "../../lib/errors.js";
import type { Db } from "../../storage/db.js";
import type { SupportedResponse } from "../../protocol/index.js";
import type { ApiKeyPrincipal } from "../keys/authenticator.js";
import type { PaymentService } from "../payments/paymentService.js";
import type { PaymentEngine } from "../payments/engine.js";
import { BILLING_PERIOD_DAYS, usdOf } from "../plans/plans.js";
import { priceOrder, type Buyer, type Order, type OrderLimits, type Purchase } from "./orders.js";
import {
  applyPayment,
  beginPayment,
  failPayment,
  findPayment,
  readAccountBilling,
  settlementOf,
  type BillingPaymentRow,
} from "./billingLedger.js";

/** What the route sends: the official layer's status and headers, our JSON body. */
export interface CheckoutAnswer {
  status: number;
  headers: Record<string, string>;
  body: Record<string, unknown>;
}

export interface CheckoutRequest {
  /** The request as the official HTTP layer reads it (headers, method, path, URL). */
  adapter: HTTPAdapter;
  accountId: string;
  order: Order;
  buyer: Buyer;
}

export interface CheckoutOptions {
  db: Db;
  /** This service's payment core, as the billing account uses it (no quota stage). */
  payments: PaymentService;
  /** Reads a payment's authorization key (its settlement is recorded under it) and payer. */
  engine: Pick<PaymentEngine, "inspect">;
  /** Each billing network's `exact` server scheme (its family's), to price and offer with. */
  schemes: ReadonlyMap<string, SchemeNetworkServer>;
  principal: ApiKeyPrincipal;
  supported: () => SupportedResponse;
  networks: readonly string[];
  payTo: string;
  limits: OrderLimits & { paygGraceMicroUsd: number };
  log: Logger;
}

/**
 * An error of this service's payment core (a chain or database outage, most
 * often), carried through the official resource server, which rethrows only
 * this kind and turns any other into a refused payment: the buyer gets the
 * core's own answer (a 503 to retry), never a refusal for an outage.
 */
class CoreError extends FacilitatorResponseError {
  constructor(readonly error: unknown) {
    super("the payment core failed");
  }
}

const passThrough = (error: unknown): never => {
  throw new CoreError(error);
};

/** Runs a step of the official layer, giving back the core's own error when it threw one. */
async function unwrapped<T>(step: Promise<T>): Promise<T> {
  try {
    return await step;
  } catch (e) {
    throw e instanceof CoreError ? e.error : e;
  }
}

/**
 * The official x402 facilitator interface over this service's own payment
 * core: no HTTP hop, the billing account as the caller.
 */
class OwnFacilitator implements FacilitatorClient {
  constructor(
    private readonly payments: PaymentService,
    private readonly principal: ApiKeyPrincipal,
    private readonly supportedNow: () => SupportedResponse,
  ) {}

  verify(paymentPayload: PaymentPayload, paymentRequirements: PaymentRequirements) {
    return this.payments
      .verify(this.principal, { x402Version: 2, paymentPayload, paymentRequirements })
      .catch(passThrough);
  }

  settle(paymentPayload: PaymentPayload, paymentRequirements: PaymentRequirements) {
    return this.payments
      .settle(this.principal, { x402Version: 2, paymentPayload, paymentRequirements })
      .catch(passThrough);
  }

  getSupported() {
    const s = this.supportedNow();
    return Promise.resolve({
      kinds: s.kinds.map((k) => ({ ...k, network: k.network as `${string}:${string}` })),
      extensions: s.extensions,
      signers: s.signers,
    });
  }
}

export class BillingCheckout {
  private readonly http: x402HTTPResourceServer;
  /** Each request's purchase, for the official layer's price and 402 body callbacks. */
  private readonly purchases = new WeakMap<HTTPAdapter, Purchase>();
  private usdc = new Map<string, { asset: string; extra: Record<string, unknown> }>();
  private ready: Promise<void> | undefined;

  constructor(private readonly opts: CheckoutOptions) {
    const server = new x402ResourceServer(
      new OwnFacilitator(opts.payments, opts.principal, opts.supported),
    );
    for (const network of opts.networks) {
      server.register(network as `${string}:${string}`, schemeOf(opts.schemes, network));
    }
    const purchaseOf = (ctx: HTTPRequestContext) => {
      const p = this.purchases.get(ctx.adapter);
      if (!p) throw new Error("no purchase for this request");
      return p;
    };
    const routes: RoutesConfig = {
      accepts: opts.networks.map((network) => ({
        scheme: "exact",
        network: network as `${string}:${string}`,
        payTo: opts.payTo,
        // The amount exactly, in USDC's atomic units (micro-USD), with the
        // asset and EIP-712 domain the official scheme names for the network.
        price: (ctx: HTTPRequestContext) => {
          const usdc = this.usdc.get(network)!;
          return { amount: String(purchaseOf(ctx).priceMicroUsd), ...usdc };
        },
        maxTimeoutSeconds: 300,
      })),
      description: "A plan or a pay-as-you-go top-up of this x402 facilitator",
      mimeType: "application/json",
      unpaidResponseBody: (ctx) => ({
        contentType: "application/json",
        body: this.unpaidBody(purchaseOf(ctx)),
      }),
    };
    this.http = new x402HTTPResourceServer(server, routes);
  }

  /**
   * Asks the payment core what it supports and checks every billing network
   * is among it; run once, before the first request.
   */
  initialize(): Promise<void> {
    this.ready ??= (async () => {
      for (const network of this.opts.networks) {
        const scheme = schemeOf(this.opts.schemes, network);
        const parsed = await scheme.parsePrice("$1", network as `${string}:${string}`);
        this.usdc.set(network, { asset: parsed.asset, extra: parsed.extra ?? {} });
      }
      await this.http.initialize();
    })();
    return this.ready;
  }

  /** The USDC each billing network is paid in, as offered. */
  assets(): { network: string; asset: string }[] {
    return [...this.usdc].map(([network, u]) => ({ network, asset: u.asset }));
  }

  async handle(req: CheckoutRequest): Promise<CheckoutAnswer> {
    await this.initialize();
    const { db, limits } = this.opts;
    // The same payment presented again is answered from its row, before
    // anything else: what it bought is decided, whatever the account's plan
    // is now and whatever this request asks for.
    const earlier = await this.earlierPresentation(req);
    if (earlier) return earlier;

    const now = new Date();
    const account = await readAccountBilling(db, req.accountId);
    const purchase = priceOrder(account, req.order, req.buyer, limits, now);
    // Billing-suspended or operator-suspended, a plan would be paid for and
    // not usable: only a top-up (which may lift a balance suspension) is sold.
    if (account.suspended && req.order.kind === "plan") {
      throw new ServiceError(
        "conflict",
        account.suspendedBy === "billing"
          ? 'the pay-as-you-go balance is below zero and the account is suspended: top up first ({"topUpUsd": …}), then choose a plan'
          : "the account is suspended by the operator: contact the operator",
      );
    }
    this.purchases.set(req.adapter, purchase);

    const context: HTTPRequestContext = {
      adapter: req.adapter,
      path: req.adapter.getPath(),
      method: req.adapter.getMethod(),
    };
    const signature = req.adapter.getHeader("payment-signature");
    if (signature) context.paymentHeader = signature;
    const processed = await unwrapped(this.http.processHTTPRequest(context));
    if (processed.type === "no-payment-required") {
      throw new Error("the billing route must always require a payment");
    }
    if (processed.type === "payment-error") {
      const r = processed.response;
      const reason = r.status === 402 && signature ? refusalOf(r.headers) : undefined;
      return {
        status: r.status,
        headers: r.headers,
        body: reason
          ? {
              ...this.unpaidBody(purchase),
              error: "payment_refused",
              message: `the payment was refused: ${reason}; nothing was charged`,
              reason,
            }
          : (r.body as Record<string, unknown>),
      };
    }

    const { paymentPayload, paymentRequirements } = processed;
    const { authorizationKey: key, payer } = this.inspect(paymentPayload, paymentRequirements);
    const begun = await beginPayment(db, {
      accountId: req.accountId,
      purchase,
      source: req.buyer,
      details: {
        authorizationKey: key,
        network: paymentRequirements.network,
        asset: paymentRequirements.asset,
        payTo: paymentRequirements.payTo,
        payer: payer ?? null,
      },
    });
    if (!begun.fresh) return this.answerFromRow(begun.row, req.accountId);

    // A core error here leaves the row pending: the sweep reads the
    // settlement's record and applies or fails it.
    const settled = await unwrapped(
      this.http.processSettlement(paymentPayload, paymentRequirements, undefined, {
        request: context,
      }),
    );
    if (settled.success) {
      let applied;
      try {
        applied = await applyPayment(
          db,
          begun.row.id,
          { transaction: settled.transaction, payer: settled.payer ?? null },
          limits,
        );
      } catch (e) {
        // The money moved: never an error for it. The sweep applies it.
        this.opts.log.warn(
          { err: String(e), paymentId: begun.row.id },
          "a settled billing payment could not be applied yet; the sweep applies it",
        );
        return this.pendingAnswer(begun.row, settled.transaction);
      }
      return {
        status: 200,
        headers: settled.headers,
        body: this.paidBody(applied.row, applied.applied),
      };
    }
    // Not a success: the record of the settlement says whether anything moved.
    return this.afterFailure(begun.row, settled, req.accountId);
  }

  private async afterFailure(
    row: BillingPaymentRow,
    settled: SettleResponse & { headers: Record<string, string> },
    accountId: string,
  ): Promise<CheckoutAnswer> {
    // An unreadable record is treated as pending: the sweep decides it later.
    const recorded = await settlementOf(this.opts.db, row.authorization_key!).catch(
      () => ({ state: "pending" }) as const,
    );
    if (recorded.state === "succeeded") return this.answerFromRow(row, accountId);
    if (recorded.state === "pending") return this.pendingAnswer(row, settled.transaction);
    await failPayment(
      this.opts.db,
      row.id,
      settled.errorMessage ?? settled.errorReason ?? "failed",
    );
    this.opts.log.info(
      { accountId, reason: settled.errorReason, paymentId: row.id },
      "billing payment not settled; nothing changed",
    );
    return {
      status: 402,
      headers: settled.headers,
      body: {
        error: "payment_failed",
        message: `the payment could not be settled (${settled.errorReason ?? "failed"}${settled.errorMessage ? `: ${settled.errorMessage}` : ""}); nothing was charged and the plan is unchanged`,
        reason: settled.errorReason ?? null,
      },
    };
  }

  /**
   * A presentation of a payment this service already has a row for: the
   * payment is the row's, whatever this request asks for. Undefined when
   * there is no header, no row, or the row failed (nothing moved: the
   * payment may be tried again).
   */
  private async earlierPresentation(req: CheckoutRequest): Promise<CheckoutAnswer | undefined> {
    const header = req.adapter.getHeader("payment-signature");
    if (!header) return undefined;
    let payload: PaymentPayload | null;
    try {
      payload = decodePaymentSignatureHeader(header);
    } catch {
      return undefined; // the official layer answers a malformed header
    }
    // Any JSON decodes (`null`, a number): the official layer refuses what is not a payload.
    if (typeof payload !== "object" || payload === null || !payload.accepted) return undefined;
    let key: string;
    try {
      key = this.inspect(payload, payload.accepted).authorizationKey;
    } catch {
      return undefined;
    }
    const row = await findPayment(this.opts.db, key);
    if (!row || row.status === "failed") return undefined;
    return this.answerFromRow(row, req.accountId);
  }

  private async answerFromRow(row: BillingPaymentRow, accountId: string): Promise<CheckoutAnswer> {
    if (row.account_id !== accountId) {
      throw new ServiceError(
        "conflict",
        "this payment was already made for another account; nothing was charged to it again",
      );
    }
    let current = row;
    let applied = false;
    if (current.status === "pending") {
      const recorded = await settlementOf(this.opts.db, row.authorization_key!);
      if (recorded.state !== "succeeded") return this.pendingAnswer(current, null);
      const done = await applyPayment(this.opts.db, row.id, recorded, this.opts.limits);
      current = done.row;
      applied = done.applied;
    }
    const response: SettleResponse = {
      success: true,
      transaction: current.transaction ?? "",
      network: (current.network ?? "") as `${string}:${string}`,
      ...(current.payer ? { payer: current.payer } : {}),
    };
    return {
      status: 200,
      headers: { "PAYMENT-RESPONSE": encodePaymentResponseHeader(response) },
      body: this.paidBody(current, applied),
    };
  }

  private pendingAnswer(row: BillingPaymentRow, transaction: string | null): CheckoutAnswer {
    return {
      status: 202,
      headers: {},
      body: {
        status: "pending",
        paymentId: row.id,
        transaction,
        message:
          "the payment is being processed and its outcome is not known yet; it is applied once it settles, and nothing is charged if it does not (present the same payment again to see where it stands)",
      },
    };
  }

  /** The payment as the engine reads it: its authorization key and its payer. */
  private inspect(payload: PaymentPayload, requirements: PaymentRequirements) {
    return this.opts.engine.inspect({
      x402Version: 2,
      paymentPayload: payload,
      paymentRequirements: requirements,
    });
  }

  private unpaidBody(p: Purchase): Record<string, unknown> {
    return {
      error: "payment_required",
      message: `${p.summary}: pay ${usdOf(p.priceMicroUsd)} USD in USDC with x402. The PAYMENT-REQUIRED header offers it (exact, on ${this.opts.networks.join(", ")}, to ${this.opts.payTo}); an official x402 client such as @x402/fetch pays it and retries this request.`,
      purchase: purchaseView(p),
    };
  }

  private paidBody(row: BillingPaymentRow, applied: boolean): Record<string, unknown> {
    return {
      applied,
      ...(applied
        ? {}
        : {
            message: "this payment was already applied; nothing changed (it is not applied twice)",
          }),
      payment: paymentView(row),
    };
  }
}

function purchaseView(p: Purchase) {
  return {
    kind: p.order.kind,
    plan: p.order.kind === "plan" ? p.order.plan : null,
    priceUsd: usdOf(p.priceMicroUsd),
    priceMicroUsd: String(p.priceMicroUsd),
    effect: p.effect ?? null,
    periodDays: p.order.kind === "plan" ? BILLING_PERIOD_DAYS : null,
    periodStart: p.periodStart?.toISOString() ?? null,
    periodEnd: p.periodEnd?.toISOString() ?? null,
    summary: p.summary,
  };
}

function paymentView(row: BillingPaymentRow) {
  const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);
  return {
    id: row.id,
    kind: row.kind,
    plan: row.plan,
    amountUsd: usdOf(row.amount_micro_usd),
    // bigint columns: a string from PostgreSQL, a number from PGlite.
    amountMicroUsd: String(row.amount_micro_usd),
    status: row.status,
    network: row.network,
    transaction: row.transaction,
    payer: row.payer,
    periodStart: iso(row.period_start),
    periodEnd: iso(row.period_end),
    paidAt: iso(row.paid_at),
  };
}

/** A billing network's server scheme; every network sold has one (createBilling loads them). */
function schemeOf(
  schemes: ReadonlyMap<string, SchemeNetworkServer>,
  network: string,
): SchemeNetworkServer {
  const scheme = schemes.get(network);
  if (!scheme) throw new Error(`no exact server scheme for ${network}`);
  return scheme;
}

/** The reason the official layer put in a 402's PAYMENT-REQUIRED (`error`). */
function refusalOf(headers: Record<string, string>): string | undefined {
  const encoded = headers["PAYMENT-REQUIRED"];
  if (!encoded) return undefined;
  try {
    return decodePaymentRequiredHeader(encoded).error || undefined;
  } catch {
    return undefined;
  }
}
