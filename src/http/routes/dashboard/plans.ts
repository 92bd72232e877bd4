/**
 * The Plans tab:
 *
 *   GET    /api/plans                  the plan, its paid period, usage, balance, the plans
 *                                      side by side with their prices, and how they are paid
 *   POST   /api/billing/checkout       buy a plan or a top-up: an x402-protected resource
 *                                      (402 with PAYMENT-REQUIRED until paid, as for programs)
 *   POST   /api/billing/plan-change    a change that needs no payment: Free → pay-as-you-go
 *                                      at once, a downgrade at the end of the period
 *   DELETE /api/billing/plan-change    drop a change chosen for the end of the period
 *   GET    /api/billing/history        the billing payments and comps
 *   GET    /api/billing/history.csv    the same as CSV
 *
 * A session may buy anything it can pay for, but never switch to a paid
 * plan without a payment: that was the free upgrade of finding 5. The API
 * key's upgrade path (GET/POST /api/billing/upgrade) is in routes/billing.ts.
 */
import type { FastifyInstance } from "fastify";
import type { Dashboard } from "../../../features/dashboard/dashboard.js";
import type { BillingFeature } from "../../../features/billing/createBilling.js";
import { sellThroughX402 } from "../billing.js";
import { sessionRoute } from "./schemas.js";

function explain(status: {
  suspended: boolean;
  suspendedReason: string | null;
  suspendedBy: string | null;
  plan: string;
}) {
  return status.suspended
    ? {
        suspendedReason: status.suspendedReason
          ? `${status.suspendedReason} (so /settle answers 402 account_suspended; /verify still works)`
          : status.suspendedBy === "billing"
            ? "the pay-as-you-go balance does not cover this month's charges, so /settle answers 402 account_suspended; a top-up that covers it lifts the suspension at once"
            : "the operator suspended this account, so /settle answers 402 account_suspended; contact the operator",
      }
    : {};
}

export function registerPlanRoutes(
  app: FastifyInstance,
  deps: { dashboard: Dashboard; billing: BillingFeature },
): void {
  const { billing } = deps;
  const status = async (accountId: string) => {
    const s = await billing.status(accountId);
    return { ...s, ...explain(s), billing: billing.offer() };
  };

  app.get(
    "/api/plans",
    sessionRoute("plans", {
      summary:
        "The account's plan, its paid period, usage this month, pay-as-you-go balance, and the plans on offer with their prices",
    }),
    async (request) => status(request.dashboardSession!.accountId),
  );

  app.post(
    "/api/billing/checkout",
    sessionRoute("plans", {
      summary:
        "Buy a plan (at once, a renewal, or a lower plan from the end of the period) or a pay-as-you-go top-up: an x402-protected resource",
      body: {
        type: "object",
        additionalProperties: false,
        properties: {
          plan: { type: "string", enum: ["starter", "pro", "max"] },
          topUpUsd: { anyOf: [{ type: "string" }, { type: "number" }] },
        },
      },
    }),
    async (request, reply) =>
      sellThroughX402(billing, request, reply, request.dashboardSession!.accountId, "dashboard"),
  );

  app.post(
    "/api/billing/plan-change",
    sessionRoute("plans", {
      summary:
        "A change that needs no payment: Free to pay-as-you-go at once; Free or pay-as-you-go when the paid period (or pay-as-you-go's month) ends",
      body: {
        type: "object",
        required: ["plan"],
        additionalProperties: false,
        properties: { plan: { type: "string", enum: ["free", "payg"] } },
      },
    }),
    async (request) => {
      const accountId = request.dashboardSession!.accountId;
      const { plan } = request.body as { plan: "free" | "payg" };
      const { effective } = await billing.choosePlanChange(accountId, plan);
      request.log.info({ accountId, plan, effective }, "plan change chosen in the dashboard");
      return { effective: effective?.toISOString() ?? null, ...(await status(accountId)) };
    },
  );

  app.delete(
    "/api/billing/plan-change",
    sessionRoute("plans", { summary: "Drop a change chosen for the end of the period (unpaid)" }),
    async (request) => {
      const accountId = request.dashboardSession!.accountId;
      await billing.cancelPlanChange(accountId);
      return status(accountId);
    },
  );

  app.get(
    "/api/billing/history",
    sessionRoute("plans", {
      summary: "Billing payments and comps: date, plan or top-up, amount, network, transaction",
    }),
    async (request) => ({
      items: await billing.history(request.dashboardSession!.accountId, (n, tx) =>
        deps.dashboard.explorerUrl(n, tx),
      ),
    }),
  );

  app.get(
    "/api/billing/history.csv",
    sessionRoute("plans", { summary: "The billing history as CSV", produces: ["text/csv"] }),
    async (request, reply) => {
      const items = await billing.history(request.dashboardSession!.accountId, (n, tx) =>
        deps.dashboard.explorerUrl(n, tx),
      );
      const day = new Date().toISOString().slice(0, 10);
      return reply
        .type("text/csv; charset=utf-8")
        .header("content-disposition", `attachment; filename="billing-${day}.csv"`)
        .send(billing.historyCsv(items));
    },
  );
}
