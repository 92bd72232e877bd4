/**
 * Payments for the family suites that call /verify and /settle directly:
 * requirements as a resource server built with the official packages asks
 * for them (its server scheme, initialized from the service's /supported),
 * signed by a payer's client as `@x402/fetch` would sign them.
 */
import { x402ResourceServer } from "@x402/core/server";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { facilitatorClient } from "../support/resourceServer.js";
import type { TestStack } from "../support/stack.js";
import type { FamilyAdapter } from "./adapter.js";

const servers = new WeakMap<TestStack, Promise<x402ResourceServer>>();

/** The resource server of a stack, initialized once (it reads /supported). */
function resourceServerOf(stack: TestStack, family: FamilyAdapter): Promise<x402ResourceServer> {
  let server = servers.get(stack);
  if (!server) {
    server = (async () => {
      const s = family.registerServer(new x402ResourceServer(facilitatorClient(stack)));
      await s.initialize();
      return s;
    })();
    servers.set(stack, server);
  }
  return server;
}

/** What a route asks for `atomic` units, paid to `payTo` (the family's payTo unless named). */
export async function requirementsFor(
  stack: TestStack,
  family: FamilyAdapter,
  atomic: bigint,
  payTo: string = family.payTo(stack),
): Promise<PaymentRequirements> {
  const server = await resourceServerOf(stack, family);
  const [requirements] = await server.buildPaymentRequirements({
    scheme: "exact",
    payTo,
    price: family.price(atomic),
    network: family.network,
  });
  if (!requirements) throw new Error(`no requirements for ${family.name}`);
  return requirements;
}

/** Payer `i`'s payment for `requirements`, as its client signs it. */
export async function signedBy(
  stack: TestStack,
  family: FamilyAdapter,
  i: number,
  requirements: PaymentRequirements,
): Promise<PaymentPayload> {
  const client = await family.client(stack, i);
  return client.createPaymentPayload({
    x402Version: 2,
    resource: { url: "http://127.0.0.1/family-suite", description: "", mimeType: "" },
    accepts: [requirements],
  });
}

/** The body of /verify and /settle: `payload` presented for `requirements`. */
export function requestOf(payload: PaymentPayload, requirements: PaymentRequirements) {
  return {
    x402Version: 2,
    paymentPayload: { ...payload, accepted: requirements },
    paymentRequirements: requirements,
  };
}
