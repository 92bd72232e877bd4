/**
 * Everything the dashboard adds to the HTTP server: cookies, sign-in, the
 * JSON API under /api/ (one module per tab) and the web app under /dashboard/.
 */
import cookie from "@fastify/cookie";
import type { FastifyInstance } from "fastify";
import type { Dashboard } from "../features/dashboard/dashboard.js";
import type { SignIn } from "../features/identity/signIn.js";
import { registerSignInRoutes } from "./routes/dashboard/signIn.js";
import { registerSessionRoute } from "./routes/dashboard/account.js";
import { registerActivityRoutes } from "./routes/dashboard/activity.js";
import { registerSettlementRoutes } from "./routes/dashboard/settlements.js";
import { registerPlanRoutes } from "./routes/dashboard/plans.js";
import { registerKeyRoutes } from "./routes/dashboard/keys.js";
import { registerWebhookRoutes } from "./routes/dashboard/webhooks.js";
import { registerConfidentialRoutes } from "./routes/dashboard/confidential.js";
import { registerCatalogRoutes } from "./routes/dashboard/catalog.js";
import type { CatalogOwnership } from "../features/catalog/ownershipView.js";
import type { ConfidentialFeature } from "../features/confidential/createConfidential.js";
import type { BillingFeature } from "../features/billing/createBilling.js";
import { registerDashboardStatic } from "./dashboardStatic.js";

export interface DashboardHttpDeps {
  dashboard: Dashboard;
  signIn: SignIn;
  sessionTtlMs: number;
  publicUrl: string | undefined;
  /** The built web app (DASHBOARD_DIR). */
  staticDir: string;
  confidential: ConfidentialFeature;
  /** Plans paid in x402: the Plans tab's checkout, history and period changes. */
  billing: BillingFeature;
  /** The Catalog tab: the account's entries, claims and ownership events. */
  catalog: CatalogOwnership;
}

export async function registerDashboardHttp(
  app: FastifyInstance,
  deps: DashboardHttpDeps,
  mode: "devnet" | "production",
): Promise<void> {
  await app.register(cookie);
  const { dashboard } = deps;
  registerSignInRoutes(app, deps);
  registerSessionRoute(app, { dashboard, publicUrl: deps.publicUrl, mode });
  registerActivityRoutes(app, { dashboard });
  registerSettlementRoutes(app, { dashboard });
  registerPlanRoutes(app, { dashboard, billing: deps.billing });
  registerKeyRoutes(app, { dashboard });
  registerWebhookRoutes(app, { dashboard });
  registerConfidentialRoutes(app, { confidential: deps.confidential, mode });
  registerCatalogRoutes(app, { catalog: deps.catalog });
  await registerDashboardStatic(app, deps.staticDir);
}
