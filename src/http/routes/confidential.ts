/**
 * GET /confidential/status (spec 2.7, 4.6): what a resource server reads
 * before each 402 to decide which offers to make. Answers from the database
 * each time, so a mode chosen in the dashboard takes effect on the next 402.
 */
import type { FastifyInstance } from "fastify";
import type { ConfidentialMerchants } from "../../features/confidential/merchants.js";

export function registerConfidentialStatusRoute(
  app: FastifyInstance,
  deps: { merchants: ConfidentialMerchants },
): void {
  app.get(
    "/confidential/status",
    {
      config: { auth: "apiKey" },
      schema: {
        tags: ["confidential"],
        summary: "The account's confidential settlement status and offer mode",
        response: {
          200: {
            type: "object",
            required: [
              "available",
              "network",
              "contractAddress",
              "configured",
              "mode",
              "enabled",
              "merchantAddress",
            ],
            properties: {
              available: { type: "boolean" },
              network: { type: "string" },
              contractAddress: { type: "string" },
              configured: { type: "boolean" },
              mode: { type: "string", enum: ["default", "confidential", "both"] },
              enabled: { type: "boolean" },
              merchantAddress: { type: "string" },
            },
          },
        },
      },
    },
    async (request) => deps.merchants.status(request.principal!.accountId),
  );
}
