/**
 * What the dashboard's Webhooks tab does beyond the command line: choose the
 * events, keep the signing secret when only the URL changes, rotate the
 * secret, queue a test delivery, and re-send an event that was given up.
 * Every function is scoped to one account: an id of another account's event
 * is simply not found.
 */
import { randomUUID } from "node:crypto";
import type { Db } from "../../storage/db.js";
import { generateWebhookSecret } from "./signing.js";
import { assertPublicTarget } from "./ssrfGuard.js";
import { BILLING_EVENT_TYPES } from "./billingEvents.js";

export const WEBHOOK_EVENT_TYPES = [
  "settlement.succeeded",
  "settlement.failed",
  ...BILLING_EVENT_TYPES,
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];
const TEST_EVENT_TYPE = "webhook.test";

export interface EndpointView {
  url: string;
  events: string[];
  /** The secret's first characters only; the whole secret is shown when made. */
  secretHint: string;
  updatedAt: Date;
}

export async function readEndpoint(db: Db, accountId: string): Promise<EndpointView | undefined> {
  const row = await db
    .selectFrom("webhook_endpoints")
    .select(["url", "events", "secret", "updated_at"])
    .where("account_id", "=", accountId)
    .executeTakeFirst();
  return row
    ? {
        url: row.url,
        events: row.events,
        secretHint: `${row.secret.slice(0, 10)}…`,
        updatedAt: row.updated_at,
      }
    : undefined;
}

/**
 * Sets the endpoint URL (after the SSRF check) and its events. A new
 * endpoint gets a secret, returned this once; an existing one keeps its
 * secret, so receivers need no change when only the URL moves.
 */
export async function saveEndpoint(
  db: Db,
  accountId: string,
  input: { url: string; events: readonly WebhookEventType[] },
  opts: { allowPrivateTargets: boolean },
): Promise<{ endpoint: EndpointView; secret: string | null }> {
  const checked = (await assertPublicTarget(input.url, opts.allowPrivateTargets)).toString();
  const events = [...new Set(input.events)];
  const fresh = generateWebhookSecret();
  const now = new Date();
  const row = await db
    .insertInto("webhook_endpoints")
    .values({ account_id: accountId, url: checked, secret: fresh, events, updated_at: now })
    .onConflict((oc) =>
      oc.column("account_id").doUpdateSet({ url: checked, events, updated_at: now }),
    )
    .returning(["url", "events", "secret", "updated_at"])
    .executeTakeFirstOrThrow();
  return {
    endpoint: {
      url: row.url,
      events: row.events,
      secretHint: `${row.secret.slice(0, 10)}…`,
      updatedAt: row.updated_at,
    },
    secret: row.secret === fresh ? fresh : null,
  };
}

/** A new signing secret, returned once; deliveries from now on are signed with it. */
export async function rotateSecret(db: Db, accountId: string): Promise<string | undefined> {
  const secret = generateWebhookSecret();
  const res = await db
    .updateTable("webhook_endpoints")
    .set({ secret, updated_at: new Date() })
    .where("account_id", "=", accountId)
    .executeTakeFirst();
  return res.numUpdatedRows > 0n ? secret : undefined;
}

/**
 * Queues a `webhook.test` event through the same outbox, signing and worker
 * as real events, so a passing test means real events will arrive too.
 */
export async function queueTestEvent(db: Db, accountId: string): Promise<string | undefined> {
  const endpoint = await readEndpoint(db, accountId);
  if (!endpoint) return undefined;
  const id = `evt_${randomUUID().replace(/-/g, "")}`;
  const createdAt = new Date().toISOString();
  await db
    .insertInto("webhook_events")
    .values({
      id,
      account_id: accountId,
      type: TEST_EVENT_TYPE,
      settlement_id: null,
      payload: JSON.stringify({
        type: TEST_EVENT_TYPE,
        id,
        createdAt,
        data: { message: "a test delivery from the dashboard" },
      }),
    })
    .execute();
  return id;
}

export type ResendResult = "queued" | "not_found" | "not_failed";

/** Puts a given-up event back in the outbox for one more attempt, now. */
export async function resendEvent(
  db: Db,
  accountId: string,
  eventId: string,
): Promise<ResendResult> {
  const res = await db
    .updateTable("webhook_events")
    .set({ status: "pending", next_attempt_at: new Date(), finished_at: null, locked_until: null })
    .where("id", "=", eventId)
    .where("account_id", "=", accountId)
    .where("status", "=", "failed")
    .executeTakeFirst();
  if (res.numUpdatedRows > 0n) return "queued";
  const exists = await db
    .selectFrom("webhook_events")
    .select("status")
    .where("id", "=", eventId)
    .where("account_id", "=", accountId)
    .executeTakeFirst();
  return exists ? "not_failed" : "not_found";
}

export interface EventLogEntry {
  id: string;
  type: string;
  status: string;
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
  createdAt: Date;
  finishedAt: Date | null;
}

/** The account's recent events with their outcome and last attempt: the delivery log. */
export async function listEvents(db: Db, accountId: string, limit = 50): Promise<EventLogEntry[]> {
  const rows = await db
    .selectFrom("webhook_events as e")
    .leftJoinLateral(
      (eb) =>
        eb
          .selectFrom("webhook_deliveries as d")
          .select(["d.status_code", "d.error"])
          .whereRef("d.event_id", "=", "e.id")
          .orderBy("d.id", "desc")
          .limit(1)
          .as("last"),
      (join) => join.onTrue(),
    )
    .select([
      "e.id",
      "e.type",
      "e.status",
      "e.attempts",
      "e.created_at",
      "e.finished_at",
      "last.status_code",
      "last.error",
    ])
    .where("e.account_id", "=", accountId)
    .orderBy("e.seq", "desc")
    .limit(limit)
    .execute();
  return rows.map((r) => ({
    id: r.id,
    type: r.type,
    status: r.status,
    attempts: r.attempts,
    lastStatusCode: r.status_code ?? null,
    lastError: r.error ?? null,
    createdAt: r.created_at,
    finishedAt: r.finished_at,
  }));
}
