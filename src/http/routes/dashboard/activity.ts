/** GET /api/overview and GET /api/metrics: the Overview and Metrics tabs. */
import type { FastifyInstance } from "fastify";
import type { Dashboard } from "../../../features/dashboard/dashboard.js";
import { METRIC_RANGES, type MetricRange } from "../../../features/dashboard/activity.js";
import { sessionRoute } from "./schemas.js";

export function registerActivityRoutes(app: FastifyInstance, deps: { dashboard: Dashboard }): void {
  app.get(
    "/api/overview",
    sessionRoute("overview", {
      summary:
        "Settlements today and this month, success rate, volume by asset, quota used, latest failures, and on-chain failures in the last hour per network (with the plan's limit and, when reached, when settles resume)",
    }),
    async (request) => {
      const accountId = request.dashboardSession!.accountId;
      const [overview, plan] = await Promise.all([
        deps.dashboard.overview(accountId),
        deps.dashboard.plan(accountId),
      ]);
      return {
        ...overview,
        quota: {
          plan: plan.plan,
          limit: plan.limit,
          usedThisMonth: plan.usedThisMonth,
          metered: plan.metered,
          suspended: plan.suspended,
          paidUntil: plan.paidUntil,
          nextPlan: plan.nextPlan,
        },
      };
    },
  );

  app.get(
    "/api/metrics",
    sessionRoute("metrics", {
      summary:
        "Settlements and volume over time, by network and by asset, and the gas our signers spent on the account's settlements per network",
      querystring: {
        type: "object",
        properties: { range: { type: "string", enum: Object.keys(METRIC_RANGES), default: "24h" } },
      },
    }),
    async (request) => {
      const { range } = request.query as { range: MetricRange };
      return deps.dashboard.metrics(request.dashboardSession!.accountId, range);
    },
  );
}
