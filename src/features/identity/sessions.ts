/**
 * Dashboard sessions. The cookie holds a random token; the database holds
 * only its SHA-256, so reading the table does not let anyone sign in. Every
 * request reads the row (no cache), which is what makes a sign-out, or an
 * operator deleting sessions, take effect on every replica at once.
 */
import { createHash, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import type { Db } from "../../storage/db.js";

export interface DashboardSession {
  id: string;
  accountId: string;
  issuer: string;
  subject: string;
  csrfToken: string;
  expiresAt: Date;
}

export interface StartedSession extends DashboardSession {
  /** The cookie value. Returned once; only its hash is stored. */
  token: string;
}

const TOKEN_FORMAT = /^[A-Za-z0-9_-]{43}$/;

function hashToken(token: string): Buffer {
  return createHash("sha256").update(token).digest();
}

export async function startSession(
  db: Db,
  who: { accountId: string; issuer: string; subject: string },
  ttlMs: number,
  now = new Date(),
): Promise<StartedSession> {
  const token = randomBytes(32).toString("base64url");
  const csrfToken = randomBytes(32).toString("base64url");
  const expiresAt = new Date(now.getTime() + ttlMs);
  const id = randomUUID();
  await db
    .insertInto("dashboard_sessions")
    .values({
      id,
      token_hash: hashToken(token),
      account_id: who.accountId,
      issuer: who.issuer,
      subject: who.subject,
      csrf_token: csrfToken,
      expires_at: expiresAt,
    })
    .execute();
  return { id, token, csrfToken, expiresAt, ...who };
}

/** The live session a cookie token names, or undefined (unknown, malformed or expired). */
export async function findSession(
  db: Db,
  token: string | undefined,
  now = new Date(),
): Promise<DashboardSession | undefined> {
  if (!token || !TOKEN_FORMAT.test(token)) return undefined;
  const row = await db
    .selectFrom("dashboard_sessions")
    .selectAll()
    .where("token_hash", "=", hashToken(token))
    .where("expires_at", ">", now)
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    id: row.id,
    accountId: row.account_id,
    issuer: row.issuer,
    subject: row.subject,
    csrfToken: row.csrf_token,
    expiresAt: row.expires_at,
  };
}

/** Ends a session server-side. Returns whether a row was deleted. */
export async function endSession(db: Db, id: string): Promise<boolean> {
  const res = await db.deleteFrom("dashboard_sessions").where("id", "=", id).executeTakeFirst();
  return res.numDeletedRows > 0n;
}

/** Removes expired rows; cheap, run now and then. */
export async function pruneExpiredSessions(db: Db, now = new Date()): Promise<number> {
  const res = await db
    .deleteFrom("dashboard_sessions")
    .where("expires_at", "<=", now)
    .executeTakeFirst();
  return Number(res.numDeletedRows);
}

/** Constant-time comparison of the CSRF header with the session's token. */
export function csrfMatches(session: DashboardSession, header: string | undefined): boolean {
  if (!header) return false;
  const a = Buffer.from(session.csrfToken);
  const b = Buffer.from(header);
  return a.length === b.length && timingSafeEqual(a, b);
}
