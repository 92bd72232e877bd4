/**
 * `X-API-Key` authentication for the paid operations, and the rate limit
 * that follows from it: a refused key counts against the client IP, a valid
 * one against its own plan's budget (rateLimits.ts).
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { ApiKeyAuthenticator, ApiKeyPrincipal } from "../features/keys/authenticator.js";
import type { PlanName } from "../features/plans/plans.js";
import { sendError } from "./errorEnvelope.js";
import type { KeyedRateLimits } from "./rateLimits.js";

declare module "fastify" {
  interface FastifyRequest {
    principal?: ApiKeyPrincipal;
    /** The plan of the key's account, as of the key's cached lookup. */
    keyPlan?: PlanName;
  }
  interface FastifyContextConfig {
    /**
     * `apiKey`: the route needs a valid X-API-Key; `session`: a signed-in
     * dashboard session (and a CSRF token on state-changing calls). One hook
     * checks every route.
     */
    auth?: "apiKey" | "session";
  }
}

export function requireApiKey(auth: ApiKeyAuthenticator, limits?: KeyedRateLimits) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    // Over the address's budget, a refused key is answered 429 instead of 401.
    const refuse = async (message: string) =>
      (await limits?.refusedKey(request, reply)) ?? sendError(reply, "unauthorized", message);
    const header = request.headers["x-api-key"];
    const key = Array.isArray(header) ? header[0] : header;
    if (!key) {
      return refuse(
        "missing X-API-Key header: create a key with `npm run keys -- create --name <name>`",
      );
    }
    const found = await auth.identify(key.trim());
    if (!found) return refuse("the X-API-Key is not valid or has been deleted");
    request.principal = found.principal;
    request.keyPlan = found.plan;
    return limits?.validKey(request, reply);
  };
}
