/**
 * `X-API-Key` authentication for the paid operations.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { ApiKeyAuthenticator, ApiKeyPrincipal } from "../features/keys/authenticator.js";
import { sendError } from "./errorEnvelope.js";

declare module "fastify" {
  interface FastifyRequest {
    principal?: ApiKeyPrincipal;
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

export function requireApiKey(auth: ApiKeyAuthenticator) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const header = request.headers["x-api-key"];
    const key = Array.isArray(header) ? header[0] : header;
    if (!key) {
      return sendError(
        reply,
        "unauthorized",
        "missing X-API-Key header: create a key with `npm run keys -- create --name <name>`",
      );
    }
    const principal = await auth.authenticate(key.trim());
    if (!principal)
      return sendError(reply, "unauthorized", "the X-API-Key is not valid or has been deleted");
    request.principal = principal;
    return undefined;
  };
}
