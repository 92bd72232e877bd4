/**
 * The Catalog tab (docs/discovery.md, "Who owns an entry"):
 *
 *   GET  /api/catalog             the account's entries with their state, its claims on
 *                                 entries other accounts hold, the events that concern it
 *                                 (a takeover shows to the account that gained and the one
 *                                 that lost the entry), and its challenge token
 *   POST /api/catalog/challenge   make the challenge token (the same one afterwards)
 *   POST /api/catalog/check       check an entry it holds or claims soon
 */
import type { FastifyInstance } from "fastify";
import type { CatalogOwnership } from "../../../features/catalog/ownershipView.js";
import { sendError } from "../../errorEnvelope.js";
import { sessionRoute } from "./schemas.js";

export function registerCatalogRoutes(
  app: FastifyInstance,
  deps: { catalog: CatalogOwnership },
): void {
  app.get(
    "/api/catalog",
    sessionRoute("catalog", {
      summary:
        "The account's catalog entries and their state, its claims, ownership events and challenge token",
    }),
    async (request) => deps.catalog.overview(request.dashboardSession!.accountId),
  );

  app.post(
    "/api/catalog/challenge",
    sessionRoute("catalog", {
      summary: "The challenge token to publish at /.well-known/x402-catalog (made on first use)",
    }),
    async (request) => deps.catalog.challenge(request.dashboardSession!.accountId),
  );

  app.post(
    "/api/catalog/check",
    sessionRoute("catalog", {
      summary: "Check an entry the account holds or claims: now, or 5 minutes after its last check",
      body: {
        type: "object",
        required: ["resource"],
        additionalProperties: false,
        properties: {
          resource: { type: "string", minLength: 1, maxLength: 2048 },
          toolName: { type: "string", maxLength: 128 },
        },
      },
    }),
    async (request, reply) => {
      const body = request.body as { resource: string; toolName?: string };
      const scheduled = await deps.catalog.requestCheck(
        request.dashboardSession!.accountId,
        body.resource,
        body.toolName ?? "",
      );
      if (!scheduled)
        return sendError(
          reply,
          "not_found",
          "this account neither holds nor claims that catalog entry",
        );
      return scheduled;
    },
  );
}
