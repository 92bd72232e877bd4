/**
 * A signed-in dashboard user without a browser: the identity is bound and
 * the session started through the same features the sign-in callback uses,
 * and requests carry the session cookie (and the CSRF token when asked).
 */
import { randomUUID } from "node:crypto";
import type { Db } from "../../src/storage/db.js";
import { signInAccount } from "../../src/features/identity/identities.js";
import { startSession } from "../../src/features/identity/sessions.js";

export interface DashboardUser {
  accountId: string;
  sessionId: string;
  cookie: string;
  csrfToken: string;
  /** fetch against the service as this user; `csrf: false` leaves the token out. */
  call(
    path: string,
    init?: { method?: string; body?: unknown; csrf?: boolean; headers?: Record<string, string> },
  ): Promise<Response>;
}

export async function signedInUser(
  db: Db,
  baseUrl: string,
  email?: string,
): Promise<DashboardUser> {
  const subject = randomUUID();
  const { account } = await signInAccount(db, {
    issuer: "http://127.0.0.1/test-issuer",
    subject,
    provider: "test",
    email: email ?? `${subject}@example.test`,
    name: null,
  });
  const session = await startSession(
    db,
    { accountId: account.id, issuer: "http://127.0.0.1/test-issuer", subject },
    3_600_000,
  );
  const cookie = `__Host-x402-session=${session.token}`;
  return {
    accountId: account.id,
    sessionId: session.id,
    cookie,
    csrfToken: session.csrfToken,
    call(path, init = {}) {
      const headers: Record<string, string> = { cookie, ...init.headers };
      if (init.body !== undefined) headers["content-type"] = "application/json";
      if (init.csrf !== false && (init.method ?? "GET") !== "GET")
        headers["x-csrf-token"] = session.csrfToken;
      return fetch(`${baseUrl}${path}`, {
        method: init.method ?? "GET",
        headers,
        ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
      });
    },
  };
}
