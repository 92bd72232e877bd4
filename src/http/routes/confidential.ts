/**
 * GET /confidential/status (spec 2.7, 4.6): what a resource server reads
 * before each 402 to decide which offers to make. Answers from the database
 * each time, so a mode chosen in the dashboard takes effect on the next 402.
 */
import type { FastifyInstance } from "fastify";
import type { ConfidentialMerchants } from "../../features/confidential/merchants.js";
import type { ConfidentialCredits } from "../../features/confidential/credits.js";

export function registerConfidentialStatusRoute(
  app: FastifyInstance,
  deps: { merchants: ConfidentialMerchants; credits?: ConfidentialCredits },
): void {
  // GET /confidential/days: what the Confidential tab's check shows, for a
  // merchant's own script (npm run confidential:check) with its API key.
  const credits = deps.credits;
  if (credits) {
    app.get(
      "/confidential/days",
      {
        config: { auth: "apiKey" },
        schema: {
          tags: ["confidential"],
          summary:
            "Each day still in its challenge window: the slot's credit against the day's receipts, and on a shortfall the receipts not yet presented (the merchant's own tool builds the challenge from them)",
        },
      },
      async (request) => ({ days: await credits.dayChecks(request.principal!.accountId) }),
    );
  }
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
