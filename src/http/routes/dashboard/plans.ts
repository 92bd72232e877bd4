/**
 * The Plans tab:
 *
 *   GET  /api/plans               the plan, this month's usage, the plans side by side
 *   POST /api/billing/upgrade     change plan; the next /settle already sees it
 *
 * GET /api/billing/upgrade (the link in a quota 402, for API-key callers)
 * stays in routes/billing.ts.
 */
import type { FastifyInstance } from "fastify";
import type { Dashboard } from "../../../features/dashboard/dashboard.js";
import { PLAN_NAMES, type PlanName } from "../../../features/plans/plans.js";
import { sessionRoute } from "./schemas.js";

function explain(status: { suspended: boolean; suspendedReason: string | null; plan: string }) {
  return status.suspended
    ? {
        suspendedReason: status.suspendedReason
          ? `${status.suspendedReason} (so /settle answers 402 account_suspended; /verify still works)`
          : status.plan === "payg"
            ? "pay-as-you-go charges are overdue, so /settle answers 402 account_suspended; settle the invoice with the operator, or move to a monthly plan"
            : "the operator suspended this account, so /settle answers 402 account_suspended; contact the operator",
      }
    : {};
}

export function registerPlanRoutes(app: FastifyInstance, deps: { dashboard: Dashboard }): void {
  app.get(
    "/api/plans",
    sessionRoute("plans", {
      summary: "The account's plan, usage this month and the plans on offer",
    }),
    async (request) => {
      const status = await deps.dashboard.plan(request.dashboardSession!.accountId);
      return { ...status, ...explain(status) };
    },
  );

  app.post(
    "/api/billing/upgrade",
    sessionRoute("plans", {
      summary: "Change the account's plan; takes effect on the next /settle",
      body: {
        type: "object",
        required: ["plan"],
        additionalProperties: false,
        properties: { plan: { type: "string", enum: [...PLAN_NAMES] } },
      },
    }),
    async (request) => {
      const { plan } = request.body as { plan: PlanName };
      const accountId = request.dashboardSession!.accountId;
      const status = await deps.dashboard.changePlan(accountId, plan);
      request.log.info({ accountId, plan }, "plan changed from the dashboard");
      return { ...status, ...explain(status) };
    },
  );
}
