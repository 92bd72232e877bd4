/**
 * GET /api/session: who is signed in, to which account, and the CSRF token
 * the page must send on every state-changing call. Also the facilitator URL
 * for the quick-start panel.
 */
import type { FastifyInstance } from "fastify";
import type { Dashboard } from "../../../features/dashboard/dashboard.js";
import { sessionRoute } from "./schemas.js";
import { publicOrigin } from "./signIn.js";

export function registerSessionRoute(
  app: FastifyInstance,
  deps: { dashboard: Dashboard; publicUrl: string | undefined; mode: "devnet" | "production" },
): void {
  app.get(
    "/api/session",
    sessionRoute("account", {
      summary: "The signed-in user, their account and the CSRF token",
    }),
    async (request) => {
      const session = request.dashboardSession!;
      const who = await deps.dashboard.whoAmI(session);
      return {
        account: {
          id: who.account.id,
          name: who.account.name,
          plan: who.account.plan,
          createdAt: who.account.created_at.toISOString(),
        },
        identity: who.identity ?? null,
        csrfToken: session.csrfToken,
        expiresAt: session.expiresAt.toISOString(),
        facilitatorUrl:
          publicOrigin(request, deps.publicUrl) ?? `${request.protocol}://${request.host}`,
        mode: deps.mode,
      };
    },
  );
}
