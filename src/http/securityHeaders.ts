/**
 * Browser hardening on every response, errors and redirects included:
 *
 * - `X-Content-Type-Options: nosniff`: a JSON body is never run as script.
 * - `Referrer-Policy: no-referrer`: dashboard URLs (settlement ids, sign-in
 *   outcomes) never leave in a Referer, to explorers or anyone else. The
 *   dashboard's own POSTs then carry `Origin: null`, which the CSRF check
 *   accepts and answers with the CSRF token alone (sessionAuth.ts).
 * - No framing, by CSP `frame-ancestors 'none'` and `X-Frame-Options: DENY`
 *   for older browsers: no clickjacking of the dashboard.
 * - A CSP: the dashboard's pages load only the build's own files (Vite
 *   emits no inline script or style, and React and uPlot set styles through
 *   the DOM, which `style-src` does not govern); every other answer is data,
 *   so nothing at all may load from it.
 * - HSTS only when the public URL is https: sent over plain http it is
 *   ignored, and on a devnet's loopback it would pin localhost to https.
 * - `Cache-Control: no-store` on the dashboard API and sign-in: those
 *   answers carry new API keys, webhook secrets, the session's CSRF token or
 *   the session cookie, and belong to one user.
 */
import type { FastifyInstance } from "fastify";

const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");
const DATA_CSP = "default-src 'none'; frame-ancestors 'none'";

const PRIVATE_PATHS = /^\/(?:api|auth)(?:\/|$|\?)/;
const DASHBOARD_PATHS = /^\/dashboard(?:\/|$|\?)/;

export function registerSecurityHeaders(app: FastifyInstance, opts: { hsts: boolean }): void {
  app.addHook("onSend", async (request, reply, payload) => {
    reply.header("X-Content-Type-Options", "nosniff");
    reply.header("Referrer-Policy", "no-referrer");
    reply.header("X-Frame-Options", "DENY");
    reply.header(
      "Content-Security-Policy",
      DASHBOARD_PATHS.test(request.url) ? DASHBOARD_CSP : DATA_CSP,
    );
    if (opts.hsts) reply.header("Strict-Transport-Security", "max-age=31536000");
    if (PRIVATE_PATHS.test(request.url)) reply.header("Cache-Control", "no-store");
    return payload;
  });
}

/** HSTS belongs to an https deployment only. */
export function wantsHsts(publicUrl: string | undefined): boolean {
  return publicUrl !== undefined && publicUrl.startsWith("https://");
}
