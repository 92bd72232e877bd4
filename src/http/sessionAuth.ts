/**
 * Dashboard sessions on the HTTP side: the cookies, and the check that every
 * `config: { auth: "session" }` route runs.
 *
 * The session cookie is `__Host-` prefixed (Secure, Path=/, no Domain: no
 * sibling host can set or read it), HTTP-only (no script reads it) and
 * SameSite=Lax (not sent on cross-site subrequests). Browsers treat loopback
 * HTTP as a secure context, so the devnet's http://127.0.0.1 works with it too.
 *
 * CSRF: a state-changing call must carry the session's CSRF token in
 * `X-CSRF-Token`. Only the dashboard's own pages can read that token (from
 * `GET /api/session`, which CORS keeps from other origins), so a forged
 * cross-site form or fetch cannot supply it. A foreign `Origin` is refused too.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { CookieSerializeOptions } from "@fastify/cookie";
import type { Dashboard } from "../features/dashboard/dashboard.js";
import { csrfMatches, type DashboardSession } from "../features/identity/sessions.js";
import { sendError } from "./errorEnvelope.js";

export const SESSION_COOKIE = "__Host-x402-session";
/** The checks of a sign-in under way (state, nonce, PKCE verifier), for ten minutes. */
export const SIGN_IN_COOKIE = "__Host-x402-signin";
const CSRF_HEADER = "x-csrf-token";

declare module "fastify" {
  interface FastifyRequest {
    dashboardSession?: DashboardSession;
  }
}

export function cookieOptions(maxAgeSeconds: number): CookieSerializeOptions {
  return { path: "/", httpOnly: true, secure: true, sameSite: "lax", maxAge: maxAgeSeconds };
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

export function requireSession(dashboard: Dashboard) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const session = await dashboard.session(request.cookies[SESSION_COOKIE]);
    if (!session) {
      return sendError(
        reply,
        "unauthorized",
        "no dashboard session: sign in at /dashboard/ (the session may have expired or been signed out)",
      );
    }
    if (!SAFE_METHODS.has(request.method)) {
      const origin = request.headers.origin;
      if (origin && origin !== "null" && safeHost(origin) !== request.host) {
        return sendError(reply, "forbidden", `requests from ${origin} may not change this account`);
      }
      const header = request.headers[CSRF_HEADER];
      if (!csrfMatches(session, Array.isArray(header) ? header[0] : header)) {
        return sendError(
          reply,
          "forbidden",
          "missing or wrong X-CSRF-Token header: send the csrfToken from GET /api/session",
        );
      }
    }
    request.dashboardSession = session;
    return undefined;
  };
}

function safeHost(origin: string): string | undefined {
  try {
    return new URL(origin).host;
  } catch {
    return undefined;
  }
}
