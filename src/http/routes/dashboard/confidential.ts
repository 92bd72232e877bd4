/** GET /api/confidential: the Confidential tab, until confidential settlement lands. */
import type { FastifyInstance } from "fastify";
import { sessionRoute } from "./schemas.js";

export function registerConfidentialRoute(app: FastifyInstance): void {
  app.get(
    "/api/confidential",
    sessionRoute("confidential", {
      summary: "Confidential settlement: what it is and whether it is on",
    }),
    async () => ({
      available: false,
      enabled: false,
      description:
        "Confidential settlement credits your payments into an encrypted balance (Zama fhEVM), so amounts and totals are not public on-chain. Payments are credited in one batch each day at 00:00 UTC, and you withdraw to a wallet you hold the keys of. It is not yet available on this service.",
    }),
  );
}
