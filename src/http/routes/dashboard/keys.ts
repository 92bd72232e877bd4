/**
 * The API Keys tab:
 *
 *   GET    /api/keys        the account's live keys (masked)
 *   POST   /api/keys        create one; the full key is in this answer only (at most
 *                            API_KEYS_PER_ACCOUNT live keys, then 409 key_limit_reached)
 *   DELETE /api/keys/:id    delete (revoke) one of the account's keys
 */
import type { FastifyInstance } from "fastify";
import type { Dashboard } from "../../../features/dashboard/dashboard.js";
import { sendError } from "../../errorEnvelope.js";
import { errorEnvelope, sessionRoute, uuidParams } from "./schemas.js";

const keyListing = {
  type: "object",
  properties: {
    id: { type: "string" },
    name: { type: "string" },
    prefix: { type: "string", description: "masked start of the key" },
    createdAt: { type: "string", format: "date-time" },
    lastUsedAt: { type: ["string", "null"], format: "date-time" },
  },
} as const;

export function registerKeyRoutes(app: FastifyInstance, deps: { dashboard: Dashboard }): void {
  app.get(
    "/api/keys",
    sessionRoute("api keys", {
      summary: "The account's API keys, masked",
      response: {
        200: { type: "object", properties: { keys: { type: "array", items: keyListing } } },
      },
    }),
    async (request) => ({ keys: await deps.dashboard.keys(request.dashboardSession!.accountId) }),
  );

  app.post(
    "/api/keys",
    sessionRoute("api keys", {
      summary: "Create an API key; the full key is returned this once",
      body: {
        type: "object",
        required: ["name"],
        additionalProperties: false,
        properties: { name: { type: "string", minLength: 1, maxLength: 100, pattern: "\\S" } },
      },
      response: {
        201: {
          type: "object",
          properties: {
            ...keyListing.properties,
            key: { type: "string", description: "the full key: shown only now" },
          },
        },
        409: {
          ...errorEnvelope,
          description: "key_limit_reached: the account holds the most keys it may",
        },
      },
    }),
    async (request, reply) => {
      const { name } = request.body as { name: string };
      const created = await deps.dashboard.createKey(
        request.dashboardSession!.accountId,
        name.trim(),
      );
      return reply.status(201).send({
        id: created.id,
        name: created.name,
        prefix: created.prefix,
        createdAt: created.createdAt,
        lastUsedAt: null,
        key: created.key,
      });
    },
  );

  app.delete(
    "/api/keys/:id",
    sessionRoute("api keys", {
      summary: "Delete (revoke) an API key; /verify and /settle refuse it from now on",
      params: uuidParams,
    }),
    async (request, reply) => {
      const { id } = request.params as { id: string };
      const deleted = await deps.dashboard.deleteKey(request.dashboardSession!.accountId, id);
      if (!deleted) return sendError(reply, "not_found", `no live API key ${id} in this account`);
      return { deleted: true, id };
    },
  );
}
