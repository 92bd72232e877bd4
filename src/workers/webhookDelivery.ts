/**
 * Delivers settlement webhooks from the outbox (`webhook_events`).
 *
 * At least once: an event leaves the outbox only when its endpoint answered
 * 2xx, or when it was given up after `maxAttempts` attempts (about 24 hours
 * with the default back-off 30 s, 1 m, 2 m, … capped at 4 h, 15 attempts).
 * Receivers deduplicate by the `webhook-id` header, which is the event id and
 * the same on every attempt.
 *
 * In order per account: only the oldest pending event of an account is ever
 * eligible, so event N+1 waits until N was delivered or given up.
 *
 * Across replicas: an attempt is claimed by one atomic UPDATE that sets a
 * lease (`locked_until`) and re-checks it on the locked row, so two
 * replicas never send the same attempt at once; a replica that dies mid-send
 * loses the lease and the attempt is retried. The claim (which also reads
 * the endpoint) and the result are one statement each; nothing is held open
 * across the HTTP call (PGlite has a single connection).
 *
 * Why not pg-boss: it needs a real PostgreSQL server (its own schema, LISTEN/
 * NOTIFY, many connections) and does not run on PGlite, this service's
 * default database. A per-account ordering rule would also have to be built
 * on top of it. This small polling worker works on both backends.
 *
 * Delivery happens only here, never in the /settle request path, and each
 * attempt has its own timeout, so a slow receiver never delays /settle.
 */
import http from "node:http";
import https from "node:https";
import { isIP } from "node:net";
import { sql, type RawBuilder } from "kysely";
import type { Db } from "../storage/db.js";
import type { Logger } from "../lib/logger.js";
import { describeError } from "../lib/errors.js";
import { signWebhook } from "../features/webhooks/signing.js";
import { guardedLookup, isPrivateAddress } from "../features/webhooks/ssrfGuard.js";

export interface WebhookDeliveryOptions {
  db: Db;
  log: Logger;
  /** Allow loopback/private targets (WEBHOOK_ALLOW_PRIVATE_TARGETS). */
  allowPrivateTargets: boolean;
  /** How often to look for due events (default 1 s). */
  pollIntervalMs?: number;
  /** Per-attempt timeout (default 10 s). */
  timeoutMs?: number;
  /** First retry delay (default 30 s); doubles each attempt. */
  backoffBaseMs?: number;
  /** Longest retry delay (default 4 h). */
  backoffMaxMs?: number;
  /** Attempts before an event is given up (default 15: about 24 h). */
  maxAttempts?: number;
  /** Events claimed per pass (at most one per account). */
  batchSize?: number;
}

/**
 * The claim: the oldest pending event of each account (its head), if due and
 * not leased, oldest first, leased and counted as an attempt in one atomic
 * UPDATE.
 *
 * The heads are found by walking the pending index one account at a time
 * (each step jumps to the first pending event of the next account id), so a
 * claim reads about one index entry and one row per account with pending
 * events, whatever their backlog. The claimed rows are then updated by
 * primary key. (Their status is checked as "neither delivered nor failed",
 * which the table's CHECK makes the same as pending: written as
 * `status = 'pending'` it lets the planner combine the pending index, whose
 * every entry it would then read, with the key lookup.)
 *
 * Asking each pending event instead whether an older one of its account was
 * pending read the whole backlog on every pass, and a busy account drains one
 * event per pass: a backlog of N cost about N²/2 index probes (1.4 million
 * for 1,700 events in a benchmark run).
 *
 * Two replicas may pick the same head. The UPDATE checks the lease again on
 * the row it locks (PostgreSQL re-reads a row another transaction changed
 * before updating it), so the second finds it leased and leaves it.
 */
export function claimDueEvents(leaseMs: number, batchSize: number): RawBuilder<Claimed> {
  const due = sql`next_attempt_at <= now() AND (locked_until IS NULL OR locked_until < now())`;
  return sql<Claimed>`
    WITH RECURSIVE heads AS (
      (SELECT id, account_id, seq, next_attempt_at, locked_until FROM webhook_events
        WHERE status = 'pending'
        ORDER BY account_id, seq LIMIT 1)
      UNION ALL
      SELECT next.* FROM heads h
      CROSS JOIN LATERAL (
        SELECT id, account_id, seq, next_attempt_at, locked_until FROM webhook_events
         WHERE status = 'pending' AND account_id > h.account_id
         ORDER BY account_id, seq LIMIT 1) next
    )
    UPDATE webhook_events
       SET locked_until = now() + ${leaseMs}::int * interval '1 millisecond',
           attempts = attempts + 1
     WHERE id = ANY(ARRAY(
             SELECT id FROM heads WHERE ${due} ORDER BY seq LIMIT ${batchSize}::int))
       AND status NOT IN ('delivered', 'failed') AND ${due}
    RETURNING id, account_id, payload, attempts,
      (SELECT url FROM webhook_endpoints w WHERE w.account_id = webhook_events.account_id) AS url,
      (SELECT secret FROM webhook_endpoints w WHERE w.account_id = webhook_events.account_id) AS secret`;
}

export interface Claimed {
  id: string;
  account_id: string;
  payload: string;
  attempts: number;
  /** The account's endpoint as the claim found it (null: it has none any more). */
  url: string | null;
  secret: string | null;
}

interface AttemptResult {
  url: string;
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
}

/** Delay before the retry that follows attempt `attempt` (1-based). */
export function retryDelayMs(attempt: number, baseMs: number, maxMs: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.min(attempt - 1, 30));
}

export class WebhookDeliveryWorker {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;
  private stopped = true;
  private readonly pollIntervalMs: number;
  private readonly timeoutMs: number;
  private readonly baseMs: number;
  private readonly maxMs: number;
  private readonly maxAttempts: number;
  private readonly batchSize: number;

  constructor(private readonly opts: WebhookDeliveryOptions) {
    this.pollIntervalMs = opts.pollIntervalMs ?? 1_000;
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    this.baseMs = opts.backoffBaseMs ?? 30_000;
    this.maxMs = opts.backoffMaxMs ?? 4 * 3_600_000;
    this.maxAttempts = opts.maxAttempts ?? 15;
    this.batchSize = opts.batchSize ?? 20;
  }

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }

  /**
   * A pass that attempted something is followed by the next one at once,
   * and only an idle pass waits for the poll interval. Each pass takes at
   * most one event per account (the order rule), so an account with a
   * backlog (a busy merchant: hundreds of settlements a second) would
   * otherwise get one event per interval while its outbox grew. Failed
   * attempts are not due again before their back-off, so a receiver that is
   * down costs one empty pass, not a busy loop.
   */
  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      void this.runOnce().then(
        (attempts) => this.schedule(attempts > 0 ? 0 : this.pollIntervalMs),
        () => this.schedule(this.pollIntervalMs),
      );
    }, ms);
    this.timer.unref();
  }

  /** One pass: claims due events and attempts each once. Returns attempts made. */
  runOnce(): Promise<number> {
    this.running ??= this.pass().finally(() => (this.running = undefined));
    return this.running;
  }

  private async pass(): Promise<number> {
    let claimed: Claimed[];
    try {
      claimed = await this.claim();
    } catch (e) {
      this.opts.log.warn({ err: describeError(e) }, "could not claim webhook events");
      return 0;
    }
    if (claimed.length === 0) return 0;
    await Promise.all(
      claimed.map(async (event) => {
        const { url, secret } = event;
        const hasEndpoint = url !== null && secret !== null;
        const result: AttemptResult = hasEndpoint
          ? await this.send(url, secret, event)
          : { url: "", statusCode: null, latencyMs: 0, error: "no webhook endpoint" };
        try {
          await this.record(event, result, !hasEndpoint);
        } catch (e) {
          this.opts.log.warn(
            { err: describeError(e), eventId: event.id },
            "could not record webhook attempt",
          );
        }
      }),
    );
    return claimed.length;
  }

  private async claim(): Promise<Claimed[]> {
    const leaseMs = this.timeoutMs * 3 + 5_000;
    const res = await claimDueEvents(leaseMs, this.batchSize).execute(this.opts.db);
    return res.rows;
  }

  private async send(url: string, secret: string, event: Claimed): Promise<AttemptResult> {
    const started = performance.now();
    const done = (statusCode: number | null, error: string | null): AttemptResult => ({
      url,
      statusCode,
      latencyMs: Math.round(performance.now() - started),
      error: error && error.slice(0, 500),
    });
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      return done(null, "invalid endpoint URL");
    }
    const host = target.hostname.replace(/^\[(.*)\]$/, "$1");
    // A literal IP is connected to without a lookup: check it here.
    if (!this.opts.allowPrivateTargets && isIP(host) && isPrivateAddress(host))
      return done(null, `refused: ${host} is a private, loopback or link-local address`);
    const headers = {
      ...signWebhook(secret, event.id, event.payload),
      "content-type": "application/json",
      "content-length": String(Buffer.byteLength(event.payload)),
      "user-agent": "x402-facilitator-webhooks/1",
    };
    return new Promise<AttemptResult>((resolve) => {
      let settled = false;
      const finish = (r: AttemptResult) => {
        if (!settled) {
          settled = true;
          resolve(r);
        }
      };
      const lib = target.protocol === "https:" ? https : http;
      const req = lib.request(
        target,
        {
          method: "POST",
          headers,
          lookup: guardedLookup(this.opts.allowPrivateTargets) as never,
          timeout: this.timeoutMs,
          signal: AbortSignal.timeout(this.timeoutMs),
        },
        (res) => {
          // The body is not needed; drain at most a little of it.
          res.on("data", () => undefined);
          res.on("end", () => finish(done(res.statusCode ?? null, null)));
          res.on("error", () => finish(done(res.statusCode ?? null, null)));
          setTimeout(() => {
            finish(done(res.statusCode ?? null, null));
            res.destroy();
          }, 1_000).unref();
        },
      );
      req.on("timeout", () => req.destroy(new Error(`timed out after ${this.timeoutMs} ms`)));
      req.on("error", (e) => finish(done(null, e.message || String(e))));
      req.end(event.payload);
    });
  }

  private async record(event: Claimed, r: AttemptResult, giveUp: boolean): Promise<void> {
    const ok = r.statusCode !== null && r.statusCode >= 200 && r.statusCode < 300;
    const final = ok || giveUp || event.attempts >= this.maxAttempts;
    const delay = retryDelayMs(event.attempts, this.baseMs, this.maxMs);
    const nextAt = sql<Date>`now() + ${delay}::int * interval '1 millisecond'`;
    // One statement, atomic like a transaction, at a round trip instead of
    // four (BEGIN, the attempt, the event, COMMIT): a busy account's
    // backlog is delivered one event per pass.
    await this.opts.db
      .with("attempt", (db) =>
        db.insertInto("webhook_deliveries").values({
          event_id: event.id,
          account_id: event.account_id,
          attempt: event.attempts,
          url: r.url,
          status_code: r.statusCode,
          latency_ms: r.latencyMs,
          error: r.error ?? (ok ? null : `HTTP ${r.statusCode}`),
          next_retry_at: final ? null : nextAt,
        }),
      )
      .updateTable("webhook_events")
      .set(
        final
          ? {
              status: ok ? "delivered" : "failed",
              finished_at: new Date(),
              locked_until: null,
            }
          : { next_attempt_at: nextAt, locked_until: null },
      )
      .where("id", "=", event.id)
      .where("status", "=", "pending")
      .execute();
    if (final && !ok)
      this.opts.log.warn(
        { eventId: event.id, accountId: event.account_id, attempts: event.attempts },
        "webhook event given up",
      );
  }
}
