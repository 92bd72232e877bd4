/**
 * Sign-in and sign-out:
 *
 *   GET  /auth/providers            the providers on offer
 *   GET  /auth/signin/:provider     redirect to the provider
 *   GET  /auth/callback/:provider   the provider's redirect back; starts a session
 *   POST /auth/signout              ends the session (deletes its row)
 *
 * The two GETs that a browser navigates to answer with redirects, errors
 * included (to /dashboard/?signInError=<code>, one of SignInErrorCode),
 * since a person, not a program, is on the other end. Only the code travels;
 * what went wrong is logged here.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Dashboard } from "../../../features/dashboard/dashboard.js";
import {
  SignInError,
  type PendingSignIn,
  type SignIn,
  type SignInErrorCode,
} from "../../../features/identity/signIn.js";
import { sendError } from "../../errorEnvelope.js";
import { SESSION_COOKIE, SIGN_IN_COOKIE, cookieOptions } from "../../sessionAuth.js";
import { errorResponses } from "./schemas.js";

export interface SignInDeps {
  signIn: SignIn;
  dashboard: Dashboard;
  sessionTtlMs: number;
  /** The public origin for redirect URIs; undefined: the request's own loopback origin (devnet). */
  publicUrl: string | undefined;
}

const providerParams = {
  type: "object",
  required: ["provider"],
  properties: { provider: { type: "string", pattern: "^[a-z][a-z0-9-]{0,31}$" } },
} as const;

/** The origin the browser used, when it may be trusted as the redirect base. */
export function publicOrigin(
  request: FastifyRequest,
  configured: string | undefined,
): string | undefined {
  if (configured) return configured;
  const hostname = request.hostname;
  return ["127.0.0.1", "localhost", "[::1]", "::1"].includes(hostname)
    ? `${request.protocol}://${request.host}`
    : undefined;
}

function safeReturnTo(raw: unknown): string {
  return typeof raw === "string" && /^\/dashboard(\/[\w\-/.]*)?$/.test(raw) ? raw : "/dashboard/";
}

function encodePending(p: PendingSignIn): string {
  return Buffer.from(JSON.stringify(p)).toString("base64url");
}

function decodePending(raw: string | undefined): PendingSignIn | undefined {
  if (!raw) return undefined;
  try {
    const v = JSON.parse(Buffer.from(raw, "base64url").toString("utf8")) as PendingSignIn;
    return typeof v.state === "string" && typeof v.codeVerifier === "string" ? v : undefined;
  } catch {
    return undefined;
  }
}

function backToDashboard(reply: FastifyReply, code: SignInErrorCode): FastifyReply {
  return reply.redirect(`/dashboard/?signInError=${code}`, 303);
}

/** Text from a provider's redirect, bounded for the log line. */
const forLog = (text: string | undefined) => text?.slice(0, 200);

export function registerSignInRoutes(app: FastifyInstance, deps: SignInDeps): void {
  app.get(
    "/auth/providers",
    {
      schema: {
        summary: "The identity providers the dashboard offers",
        tags: ["dashboard: sign-in"],
        response: {
          200: {
            type: "object",
            properties: {
              providers: {
                type: "array",
                items: {
                  type: "object",
                  properties: {
                    id: { type: "string" },
                    label: { type: "string" },
                    kind: { type: "string", enum: ["oidc", "github"] },
                  },
                },
              },
            },
          },
        },
      },
    },
    async () => ({ providers: deps.signIn.providers() }),
  );

  app.get(
    "/auth/signin/:provider",
    {
      schema: {
        summary: "Start a sign-in: redirects to the identity provider",
        tags: ["dashboard: sign-in"],
        params: providerParams,
        querystring: {
          type: "object",
          properties: { returnTo: { type: "string", maxLength: 200 } },
        },
        response: { 302: { description: "to the provider", type: "null" }, ...errorResponses },
      },
    },
    async (request, reply) => {
      const { provider } = request.params as { provider: string };
      if (!deps.signIn.has(provider))
        return sendError(
          reply,
          "not_found",
          `no sign-in provider "${provider}"; see GET /auth/providers`,
        );
      const origin = publicOrigin(request, deps.publicUrl);
      if (!origin)
        return sendError(
          reply,
          "invalid_request",
          "set PUBLIC_URL: sign-in redirects need the service's public address",
        );
      const returnTo = safeReturnTo((request.query as { returnTo?: string }).returnTo);
      try {
        const { url, pending } = await deps.signIn.begin(
          provider,
          `${origin}/auth/callback/${provider}`,
          returnTo,
        );
        reply.setCookie(SIGN_IN_COOKIE, encodePending(pending), cookieOptions(600));
        return reply.redirect(url, 302);
      } catch (e) {
        if (e instanceof SignInError) {
          request.log.warn({ provider, err: e.message }, "sign-in could not start");
          return backToDashboard(reply, e.reason);
        }
        throw e;
      }
    },
  );

  app.get(
    "/auth/callback/:provider",
    {
      schema: {
        summary: "The identity provider's redirect back: checks it and starts a session",
        tags: ["dashboard: sign-in"],
        params: providerParams,
        querystring: {
          type: "object",
          properties: {
            code: { type: "string" },
            state: { type: "string" },
            error: { type: "string" },
            error_description: { type: "string" },
          },
        },
        response: { 303: { description: "to the dashboard", type: "null" } },
      },
    },
    async (request, reply) => {
      const { provider } = request.params as { provider: string };
      const query = request.query as { error?: string; error_description?: string };
      const pending = decodePending(request.cookies[SIGN_IN_COOKIE]);
      reply.clearCookie(SIGN_IN_COOKIE, {
        path: "/",
        secure: true,
        httpOnly: true,
        sameSite: "lax",
      });
      if (query.error) {
        request.log.info(
          {
            provider,
            providerError: forLog(query.error),
            description: forLog(query.error_description),
          },
          "sign-in cancelled or refused by the provider",
        );
        return backToDashboard(reply, "cancelled");
      }
      if (!pending || pending.provider !== provider) return backToDashboard(reply, "expired");
      try {
        const identity = await deps.signIn.complete(
          new URL(request.url, "http://callback.invalid"),
          pending,
        );
        const session = await deps.dashboard.signIn(identity);
        reply.setCookie(
          SESSION_COOKIE,
          session.token,
          cookieOptions(Math.floor(deps.sessionTtlMs / 1000)),
        );
        return reply.redirect(pending.returnTo, 303);
      } catch (e) {
        if (e instanceof SignInError) {
          request.log.warn({ provider, err: e.message }, "sign-in refused");
          return backToDashboard(reply, e.reason);
        }
        throw e;
      }
    },
  );

  app.post(
    "/auth/signout",
    {
      config: { auth: "session" },
      schema: {
        summary: "Sign out: ends the session on every replica",
        tags: ["dashboard: sign-in"],
        security: [{ session: [] }],
        response: {
          200: { type: "object", properties: { signedOut: { type: "boolean" } } },
          ...errorResponses,
        },
      },
    },
    async (request, reply) => {
      await deps.dashboard.signOut(request.dashboardSession!.id);
      reply.clearCookie(SESSION_COOKIE, {
        path: "/",
        secure: true,
        httpOnly: true,
        sameSite: "lax",
      });
      return { signedOut: true };
    },
  );
}
