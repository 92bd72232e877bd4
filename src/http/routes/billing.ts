/**
 * GET /api/billing/upgrade: where a quota 402 (body 2.8) points. With the
 * caller's X-API-Key it answers the account's plan, this month's usage, the
 * plans on offer and how to change plan. Changing plan is an operator action
 * for now (the dashboard will take it over), so this route only reads:
 * a leaked API key must not be able to move an account between paid plans.
 */
import type { FastifyInstance } from "fastify";
import type { ApiKeyAuthenticator } from "../../features/keys/authenticator.js";
import type { PlanStatus } from "../../features/plans/planStatus.js";

export function registerBillingRoutes(
  app: FastifyInstance,
  deps: { auth: ApiKeyAuthenticator; planStatus: (accountId: string) => Promise<PlanStatus> },
): void {
  app.get("/api/billing/upgrade", { config: { auth: "apiKey" } }, async (request, reply) => {
    const status = await deps.planStatus(request.principal!.accountId);
    return reply.send({
      ...status,
      upgrade: {
        selfService: false,
        instructions: `ask the operator of this service to move account ${status.accountId} to a larger plan; it takes effect on the next /settle`,
        operatorCommand: `npm run keys -- accounts plan ${status.accountId} <${status.plans.map((p) => p.plan).join("|")}>`,
      },
    });
  });
}
