/**
 * The plans' price list and the upgrade path, for programs:
 *
 *   GET  /api/billing/plans     with X-API-Key: the plans, their prices and how they are paid
 *   GET  /api/billing/upgrade   with X-API-Key: the account's plan, usage and how to buy more
 *   POST /api/billing/upgrade   with X-API-Key: buy a plan or a top-up, an x402-protected
 *                               resource (402 with PAYMENT-REQUIRED until paid)
 *
 * `/api/billing/upgrade` is where every quota 402 points (body 2.8): a
 * program that hits its quota follows it with an x402 client and pays. An
 * API key may only buy: a higher plan, a renewal or a top-up (403 for a
 * downgrade or a move away from pay-as-you-go), so a leaked key can spend a
 * payer's money on the account but never take anything from it.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { HTTPAdapter } from "@x402/core/http";
import type { ApiKeyAuthenticator } from "../../features/keys/authenticator.js";
import type { PlanStatus } from "../../features/plans/planStatus.js";
import { planOffers } from "../../features/plans/planStatus.js";
import type { PlanLimits } from "../../features/plans/plans.js";
import type { BillingFeature, BillingOffer } from "../../features/billing/createBilling.js";
import type { CheckoutAnswer } from "../../features/billing/checkout.js";
import { readOrder, type Buyer } from "../../features/billing/orders.js";
import { sendError } from "../errorEnvelope.js";

/** The request as the official x402 HTTP layer reads it. */
function x402Adapter(request: FastifyRequest): HTTPAdapter {
  return {
    getHeader(name) {
      const v = request.headers[name.toLowerCase()];
      return Array.isArray(v) ? v[0] : v;
    },
    getMethod: () => request.method,
    getPath: () => request.url.split("?")[0]!,
    getUrl: () => `${request.protocol}://${request.host}${request.url}`,
    // Always JSON: the upgrade path is an API, never a paywall page.
    getAcceptHeader: () => "application/json",
    getUserAgent: () => request.headers["user-agent"] ?? "",
    getBody: () => request.body,
  };
}

/** Sells what the body orders to `accountId` through the x402 checkout, and answers. */
export async function sellThroughX402(
  billing: BillingFeature,
  request: FastifyRequest,
  reply: FastifyReply,
  accountId: string,
  buyer: Buyer,
): Promise<FastifyReply> {
  const order = readOrder(request.body);
  if (!billing.checkout) return notSold(reply, accountId);
  const answer: CheckoutAnswer = await billing.checkout.handle({
    adapter: x402Adapter(request),
    accountId,
    order,
    buyer,
  });
  if (answer.status === 200) {
    request.log.info(
      { accountId, buyer, payment: answer.body["payment"], applied: answer.body["applied"] },
      "billing payment",
    );
  }
  return reply
    .status(answer.status)
    .headers(answer.headers)
    .send({
      ...answer.body,
      ...(answer.status === 200 || answer.status === 202
        ? { plan: await billing.status(accountId) }
        : { requestId: request.id }),
    });
}

function notSold(reply: FastifyReply, accountId: string): FastifyReply {
  return sendError(
    reply,
    "service_unavailable",
    `this deployment sells no plans (BILLING_NETWORKS is not set): ask its operator to change the plan (npm run keys -- accounts plan ${accountId} <plan>)`,
  );
}

/** The offer as programs read it: no devnet keys, whatever the mode (they are the dashboard's). */
function publicOffer(offer: BillingOffer): Omit<BillingOffer, "devnetPayers"> {
  const { devnetPayers: _devnetPayers, ...rest } = offer;
  return rest;
}

export function registerBillingRoutes(
  app: FastifyInstance,
  deps: {
    auth: ApiKeyAuthenticator;
    planStatus: (accountId: string) => Promise<PlanStatus>;
    billing: BillingFeature;
    plans: PlanLimits;
  },
): void {
  // Behind a key like every /api/ route a program calls (the dashboard
  // reads the same list from GET /api/plans with its session).
  app.get(
    "/api/billing/plans",
    {
      config: { auth: "apiKey" },
      schema: {
        tags: ["billing"],
        summary: "The plans, what each allows and costs, and how plans are paid (x402, USDC)",
      },
    },
    async () => ({ plans: planOffers(deps.plans), billing: publicOffer(deps.billing.offer()) }),
  );

  app.get("/api/billing/upgrade", { config: { auth: "apiKey" } }, async (request, reply) => {
    const status = await deps.planStatus(request.principal!.accountId);
    const offer = deps.billing.offer();
    return reply.send({
      ...status,
      billing: publicOffer(offer),
      upgrade: {
        selfService: offer.enabled,
        instructions: offer.enabled
          ? `POST /api/billing/upgrade with this X-API-Key and {"plan": "starter" | "pro" | "max"} (a higher plan or a renewal of this one) or {"topUpUsd": "10"} (pay-as-you-go balance), through an x402 client such as @x402/fetch: it answers 402 with PAYMENT-REQUIRED (exact USDC on ${offer.networks.map((n) => n.network).join(", ")}), the client pays, and the plan changes at once`
          : `this deployment sells no plans: ask its operator to move account ${status.accountId} to a larger plan; it takes effect on the next /settle`,
        operatorCommand: `npm run keys -- accounts plan ${status.accountId} <${status.plans.map((p) => p.plan).join("|")}>`,
      },
    });
  });

  app.post(
    "/api/billing/upgrade",
    {
      config: { auth: "apiKey" },
      schema: {
        tags: ["billing"],
        summary:
          "Buy a higher plan, a renewal or a pay-as-you-go top-up: an x402-protected resource (402 with PAYMENT-REQUIRED until paid)",
        body: {
          type: "object",
          additionalProperties: false,
          properties: {
            plan: { type: "string", enum: ["starter", "pro", "max"] },
            topUpUsd: { anyOf: [{ type: "string" }, { type: "number" }] },
          },
        },
      },
    },
    async (request, reply) =>
      sellThroughX402(deps.billing, request, reply, request.principal!.accountId, "api_key"),
  );
}
