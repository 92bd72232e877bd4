/**
 * The HTTP transport: Fastify with the service's error envelope, request
 * ids, body limits and routes. No business logic lives here.
 */
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from "fastify";
import type { Logger } from "../lib/logger.js";
import { isDatabaseUnavailable, isServiceError, describeError } from "../lib/errors.js";
import { newRequestId } from "../lib/ids.js";
import type { Metrics } from "../lib/metrics.js";
import type { PaymentFacilitator } from "../facilitator/paymentFacilitator.js";
import type { PaymentService } from "../features/payments/paymentService.js";
import type { ApiKeyAuthenticator } from "../features/keys/authenticator.js";
import type { CatalogReader } from "../features/catalog/catalogReader.js";
import { codeForFastifyError, sendError, sendServiceError } from "./errorEnvelope.js";
import { findBodyProblem } from "./bodyGuard.js";
import { requireApiKey } from "./auth.js";
import { requireSession } from "./sessionAuth.js";

interface RouteEntry {
  method: string;
  url: string;
  auth: "apiKey" | "session" | "none";
}

declare module "fastify" {
  interface FastifyInstance {
    /** Every registered route and whether it needs an API key. */
    routeTable: readonly RouteEntry[];
  }
}
import { registerBrowserAndLimits, type BrowserAndLimitsOptions } from "./browserAndLimits.js";
import { registerPaymentRoutes } from "./routes/payment.js";
import { registerDiscoveryRoutes } from "./routes/discovery.js";
import { registerSupportedRoute } from "./routes/supported.js";
import { registerBillingRoutes } from "./routes/billing.js";
import { registerConfidentialStatusRoute } from "./routes/confidential.js";
import type { ConfidentialMerchants } from "../features/confidential/merchants.js";
import type { ConfidentialCredits } from "../features/confidential/credits.js";
import { registerHealthRoutes } from "./routes/health.js";
import type { ReadinessReport } from "../features/health/readiness.js";
import type { PlanStatus } from "../features/plans/planStatus.js";
import type { PlanLimits } from "../features/plans/plans.js";
import type { BillingFeature } from "../features/billing/createBilling.js";
import { registerDashboardHttp, type DashboardHttpDeps } from "./dashboardHttp.js";
import { registerOpenApi } from "./openapi.js";
import { registerSecurityHeaders, wantsHsts } from "./securityHeaders.js";
import { bearerMatches } from "./metricsAuth.js";

export interface HttpDeps {
  log: Logger;
  metrics: Metrics;
  facilitator: PaymentFacilitator;
  payments: PaymentService;
  auth: ApiKeyAuthenticator;
  catalog: CatalogReader;
  /** The account's plan and usage, for the upgrade link of a quota 402. */
  planStatus: (accountId: string) => Promise<PlanStatus>;
  /** Plans paid in x402: the price list and the upgrade path's checkout. */
  billing: BillingFeature;
  plans: PlanLimits;
  bodyLimitBytes: number;
  mode: "devnet" | "production";
  /** The readiness report behind GET /ready. */
  readiness: () => Promise<ReadinessReport>;
  trustProxy?: boolean | number | string;
  browserAndLimits?: BrowserAndLimitsOptions;
  /** The dashboard's sign-in, JSON API and web app; absent: none of it is served. */
  dashboard?: DashboardHttpDeps;
  /** Confidential settlement's status, for GET /confidential/status. */
  confidentialMerchants?: ConfidentialMerchants;
  /** Its receipts and credits, for GET /confidential/days. */
  confidentialCredits?: ConfidentialCredits;
  /** The service's version, for the OpenAPI document. */
  version?: string;
  /** The public origin (PUBLIC_URL): https turns HSTS on. */
  publicUrl?: string | undefined;
  /** Who may read GET /metrics: the bearer token when set; without one, anyone or no one. */
  metricsAccess?: { metricsToken: string | undefined; metricsPublic: boolean };
}

export async function buildHttpServer(deps: HttpDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.log.child({ component: "http" }) as unknown as FastifyBaseLogger,
    // Per-request lines would drown the log at thousands of requests per
    // second; failures are logged by the hooks below, metrics count the rest.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: deps.bodyLimitBytes,
    genReqId: () => newRequestId(),
    requestIdHeader: false,
    // Resource servers keep connections open across many calls.
    keepAliveTimeout: 72_000,
    // While shutting down, requests get this service's own 503 envelope
    // (the hook below), and idle keep-alive connections are closed at once.
    return503OnClosing: false,
    forceCloseConnections: "idle",
    // A hop count is passed as a function: Fastify's types take the number
    // form only through proxy-addr's trust function.
    trustProxy:
      typeof deps.trustProxy === "number"
        ? (_address: string, hop: number) => hop < (deps.trustProxy as number)
        : (deps.trustProxy ?? false),
  });

  // Every route, as registered: the OpenAPI description and the shared
  // security tests read this, so no route can be missed by either.
  const routeTable: RouteEntry[] = [];
  app.addHook("onRoute", (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) {
      if (method === "HEAD") continue;
      routeTable.push({ method, url: route.url, auth: route.config?.auth ?? "none" });
    }
  });
  app.decorate("routeTable", routeTable);
  registerSecurityHeaders(app, { hsts: wantsHsts(deps.publicUrl) });
  // Before any route: it collects every route's schema as it is registered.
  await registerOpenApi(app, deps.version ?? "0.0.0");
  const authenticateSession = deps.dashboard ? requireSession(deps.dashboard.dashboard) : undefined;
  // Dashboard sessions are checked before the body is validated, so a caller
  // without a session learns that first (401), not what its body lacks.
  app.addHook("preValidation", async (request, reply) => {
    if (request.routeOptions.config.auth === "session")
      return authenticateSession?.(request, reply);
  });

  // JSON only: text/plain and friends get a clear 415 instead of a guess.
  app.removeContentTypeParser("text/plain");

  // Shutdown: once closing, every answer carries `Connection: close`, so a
  // keep-alive connection that was busy when the server began to close ends
  // with its response instead of holding the process open; a request that
  // still arrives is told to go elsewhere.
  let closing = false;
  app.addHook("preClose", async () => {
    closing = true;
  });
  app.addHook("onRequest", async (request, reply) => {
    reply.header("X-Request-Id", request.id);
    if (closing) {
      reply.header("Connection", "close").header("Retry-After", "1");
      return sendError(reply, "service_unavailable", "this replica is shutting down; retry");
    }
  });
  app.addHook("onSend", async (_request, reply) => {
    if (closing) reply.header("Connection", "close");
  });

  // Every JSON body: bounded nesting and storable text, before any route runs.
  app.addHook("preValidation", async (request, reply) => {
    if (request.body === undefined) return;
    const problem = findBodyProblem(request.body);
    if (problem) return sendError(reply, "invalid_request", `${problem.path} ${problem.message}`);
  });

  app.addHook("onResponse", async (request, reply) => {
    const route = request.routeOptions.url ?? "unmatched";
    deps.metrics.httpDuration.observe(
      { route, method: request.method, status: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
    if (reply.statusCode >= 500) {
      request.log.warn(
        { route, status: reply.statusCode, requestId: request.id },
        "request failed",
      );
    }
  });

  app.setErrorHandler(async (error, request, reply) => {
    if (isServiceError(error)) return sendServiceError(reply, error);
    if (isDatabaseUnavailable(error)) {
      // The database restarted or is out of reach: an outage, retried shortly.
      request.log.warn(
        { err: describeError(error), requestId: request.id },
        "database unavailable",
      );
      reply.header("Retry-After", "1");
      return sendError(
        reply,
        "service_unavailable",
        "the service's database is unavailable for a moment; retry shortly",
      );
    }
    const err = error as { code?: string; statusCode?: number };
    const mapped = codeForFastifyError(err);
    if (mapped.code === "internal_error") {
      request.log.error({ err: describeError(error), requestId: request.id }, "unhandled error");
    }
    return sendError(reply, mapped.code, mapped.message);
  });

  app.setNotFoundHandler(async (request, reply) =>
    sendError(
      reply,
      "not_found",
      `no route ${request.method} ${request.url.split("?")[0]}; see GET /supported, POST /verify, POST /settle`,
    ),
  );

  const limits = deps.browserAndLimits
    ? await registerBrowserAndLimits(app, deps.browserAndLimits)
    : undefined;
  // One hook authenticates every route that declares `config: { auth: "apiKey" }`,
  // and counts the request against its key's plan (or, refused, its address).
  const authenticate = requireApiKey(deps.auth, limits);
  app.addHook("preHandler", async (request, reply) => {
    if (request.routeOptions.config.auth === "apiKey") return authenticate(request, reply);
  });

  registerHealthRoutes(app, { mode: deps.mode, readiness: deps.readiness });
  const metricsToken = deps.metricsAccess?.metricsToken;
  app.get("/metrics", async (request, reply) => {
    if (metricsToken !== undefined && !bearerMatches(request.headers.authorization, metricsToken)) {
      reply.header("WWW-Authenticate", "Bearer");
      return sendError(
        reply,
        "unauthorized",
        "GET /metrics needs Authorization: Bearer <METRICS_TOKEN>",
      );
    }
    if (metricsToken === undefined && deps.metricsAccess?.metricsPublic === false) {
      return sendError(
        reply,
        "unauthorized",
        "GET /metrics is closed: set METRICS_TOKEN on the service and send it as Authorization: Bearer <token> (or METRICS_PUBLIC=true inside a private network)",
      );
    }
    return reply
      .type(deps.metrics.registry.contentType)
      .send(await deps.metrics.registry.metrics());
  });
  registerSupportedRoute(app, deps.facilitator);
  registerPaymentRoutes(app, {
    ...{ payments: deps.payments, metrics: deps.metrics },
    networks: deps.facilitator.networks(),
  });
  registerDiscoveryRoutes(app, { catalog: deps.catalog });
  registerBillingRoutes(app, {
    auth: deps.auth,
    planStatus: deps.planStatus,
    billing: deps.billing,
    plans: deps.plans,
  });
  if (deps.confidentialMerchants) {
    registerConfidentialStatusRoute(app, {
      merchants: deps.confidentialMerchants,
      ...(deps.confidentialCredits ? { credits: deps.confidentialCredits } : {}),
    });
  }
  if (deps.dashboard) await registerDashboardHttp(app, deps.dashboard, deps.mode);

  await app.ready();
  return app;
}

/**
 * Stops accepting and lets in-flight requests finish (each answer closes
 * its connection); past `drainMs` the rest are cut, and their settlements
 * stay pending for the reconciler of whichever replica runs next.
 */
export async function closeGracefully(
  app: FastifyInstance,
  drainMs: number | undefined,
): Promise<void> {
  const drain =
    drainMs === undefined
      ? undefined
      : setTimeout(() => {
          app.log.warn({ drainMs }, "drain time passed; closing open connections");
          app.server.closeAllConnections();
        }, drainMs);
  await app.close().finally(() => clearTimeout(drain));
}
