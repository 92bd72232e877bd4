/** GET /supported: the live list of (scheme, network) kinds, extensions and signers. No auth. */
import type { FastifyInstance } from "fastify";
import type { PaymentFacilitator } from "../../facilitator/paymentFacilitator.js";

export function registerSupportedRoute(
  app: FastifyInstance,
  facilitator: PaymentFacilitator,
): void {
  app.get("/supported", async (_request, reply) => reply.send(facilitator.supported()));
}
