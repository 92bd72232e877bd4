/** Webhook endpoints per account, and the delivery log. */
import { sql } from "kysely";
import type { Db } from "../../storage/db.js";
import { generateWebhookSecret } from "./signing.js";
import { assertPublicTarget } from "./ssrfGuard.js";

export interface WebhookEndpoint {
  accountId: string;
  url: string;
  secret: string;
  createdAt: Date;
  updatedAt: Date;
}

/**
 * Sets (or replaces) an account's endpoint with a new secret, after the SSRF
 * check. Returns the endpoint with its secret, which is shown only once.
 */
export async function setWebhookEndpoint(
  db: Db,
  accountId: string,
  url: string,
  opts: { allowPrivateTargets: boolean },
): Promise<WebhookEndpoint> {
  const checked = await assertPublicTarget(url, opts.allowPrivateTargets);
  const secret = generateWebhookSecret();
  const now = new Date();
  const row = await db
    .insertInto("webhook_endpoints")
    .values({ account_id: accountId, url: checked.toString(), secret, updated_at: now })
    .onConflict((oc) =>
      oc.column("account_id").doUpdateSet({ url: checked.toString(), secret, updated_at: now }),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
  return toEndpoint(row);
}

export async function getWebhookEndpoint(
  db: Db,
  accountId: string,
): Promise<WebhookEndpoint | undefined> {
  const row = await db
    .selectFrom("webhook_endpoints")
    .selectAll()
    .where("account_id", "=", accountId)
    .executeTakeFirst();
  return row ? toEndpoint(row) : undefined;
}

/**
 * Removes the endpoint. Events not yet delivered are given up (status
 * `failed`), so they are not sent to a later endpoint.
 */
export async function removeWebhookEndpoint(db: Db, accountId: string): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const res = await trx
      .deleteFrom("webhook_endpoints")
      .where("account_id", "=", accountId)
      .executeTakeFirst();
    await trx
      .updateTable("webhook_events")
      .set({ status: "failed", finished_at: new Date(), locked_until: null })
      .where("account_id", "=", accountId)
      .where("status", "=", "pending")
      .execute();
    return res.numDeletedRows > 0n;
  });
}

export interface DeliveryLogEntry {
  eventId: string;
  type: string;
  attempt: number;
  url: string;
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
  nextRetryAt: Date | null;
  at: Date;
}

export async function listWebhookDeliveries(
  db: Db,
  accountId: string,
  limit = 50,
): Promise<DeliveryLogEntry[]> {
  const rows = await db
    .selectFrom("webhook_deliveries as d")
    .innerJoin("webhook_events as e", "e.id", "d.event_id")
    .select([
      "d.event_id",
      "e.type",
      "d.attempt",
      "d.url",
      "d.status_code",
      "d.latency_ms",
      "d.error",
      "d.next_retry_at",
      "d.created_at",
    ])
    .where("d.account_id", "=", accountId)
    .orderBy("d.id", "desc")
    .limit(limit)
    .execute();
  return rows.map((r) => ({
    eventId: r.event_id,
    type: r.type,
    attempt: r.attempt,
    url: r.url,
    statusCode: r.status_code,
    latencyMs: r.latency_ms,
    error: r.error,
    nextRetryAt: r.next_retry_at,
    at: r.created_at,
  }));
}

function toEndpoint(row: {
  account_id: string;
  url: string;
  secret: string;
  created_at: Date;
  updated_at: Date;
}): WebhookEndpoint {
  return {
    accountId: row.account_id,
    url: row.url,
    secret: row.secret,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** Events in the outbox not yet delivered or given up (read from the pending index). */
export async function countPendingWebhookEvents(db: Db): Promise<number> {
  const row = await db
    .selectFrom("webhook_events")
    .select(sql<number>`count(*)::int`.as("count"))
    .where("status", "=", "pending")
    .executeTakeFirstOrThrow();
  return row.count;
}
