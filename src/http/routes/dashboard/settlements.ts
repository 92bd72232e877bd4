/**
 * The Settlements tab:
 *
 *   GET /api/settlements          a page, newest first (filters, search, cursor)
 *   GET /api/settlements.csv      the same filters as CSV (up to 100,000 rows)
 *   GET /api/settlements/:id      one settlement of the account
 */
import { Readable } from "node:stream";
import type { FastifyInstance } from "fastify";
import type { Dashboard } from "../../../features/dashboard/dashboard.js";
import {
  InvalidCursorError,
  type SettlementFilters,
} from "../../../features/dashboard/settlementList.js";
import type { SettlementStatus } from "../../../storage/schema.js";
import { sendError } from "../../errorEnvelope.js";
import { sessionRoute, uuidParams } from "./schemas.js";

const filterProperties = {
  network: { type: "string", maxLength: 64, description: "CAIP-2 id" },
  scheme: { type: "string", maxLength: 32 },
  status: { type: "string", enum: ["pending", "succeeded", "failed", "not_attempted"] },
  keyId: { type: "string", format: "uuid", description: "API key id" },
  from: { type: "string", format: "date-time", description: "started at or after" },
  to: { type: "string", format: "date-time", description: "started before" },
  q: { type: "string", minLength: 1, maxLength: 200, description: "payer or transaction prefix" },
} as const;

interface FilterQuery {
  network?: string;
  scheme?: string;
  status?: SettlementStatus;
  keyId?: string;
  from?: string;
  to?: string;
  q?: string;
}

function filtersOf(q: FilterQuery): SettlementFilters {
  return {
    network: q.network || undefined,
    scheme: q.scheme || undefined,
    status: q.status,
    keyId: q.keyId,
    from: q.from ? new Date(q.from) : undefined,
    to: q.to ? new Date(q.to) : undefined,
    q: q.q?.trim() || undefined,
  };
}

export function registerSettlementRoutes(
  app: FastifyInstance,
  deps: { dashboard: Dashboard },
): void {
  app.get(
    "/api/settlements",
    sessionRoute("settlements", {
      summary: "Every settle attempt of the account, newest first, with keyset pagination",
      querystring: {
        type: "object",
        properties: {
          ...filterProperties,
          cursor: { type: "string", maxLength: 200 },
          limit: { type: "integer", minimum: 1, maximum: 200, default: 50 },
        },
      },
    }),
    async (request, reply) => {
      const query = request.query as FilterQuery & { cursor?: string; limit: number };
      try {
        return await deps.dashboard.settlements(
          request.dashboardSession!.accountId,
          filtersOf(query),
          {
            cursor: query.cursor,
            limit: query.limit,
          },
        );
      } catch (e) {
        if (e instanceof InvalidCursorError) return sendError(reply, "invalid_request", e.message);
        throw e;
      }
    },
  );

  app.get(
    "/api/settlements.csv",
    sessionRoute("settlements", {
      summary: "The filtered settlements as CSV",
      querystring: { type: "object", properties: filterProperties },
      produces: ["text/csv"],
    }),
    async (request, reply) => {
      const rows = deps.dashboard.settlementsCsv(
        request.dashboardSession!.accountId,
        filtersOf(request.query as FilterQuery),
      );
      const day = new Date().toISOString().slice(0, 10);
      return reply
        .type("text/csv; charset=utf-8")
        .header("content-disposition", `attachment; filename="settlements-${day}.csv"`)
        .send(Readable.from(rows));
    },
  );

  app.get(
    "/api/settlements/:id",
    sessionRoute("settlements", { summary: "One settlement of the account", params: uuidParams }),
    async (request, reply) => {
      const { id } = request.params as { id: string };
      const page = await deps.dashboard.settlements(
        request.dashboardSession!.accountId,
        { id },
        { limit: 1 },
      );
      const found = page.items[0];
      if (!found) return sendError(reply, "not_found", `no settlement ${id} in this account`);
      return found;
    },
  );
}
