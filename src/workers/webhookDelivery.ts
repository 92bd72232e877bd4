/**
 * Delivers settlement webhooks from the outbox (`webhook_events`).
 *
 * At least once: an event leaves the outbox only when its endpoint answered
 * 2xx, or when it was given up after `maxAttempts` attempts (about 24 hours
 * with the default back-off 30 s, 1 m, 2 m, … capped at 4 h, 15 attempts).
 * Receivers deduplicate by the `webhook-id` header, which is the event id and
 * the same on every attempt.
 *
 * In order per account: event N+1 is sent only after N was delivered or
 * given up. A pass takes an account's oldest pending events as one run and
 * sends them one after the other, stopping at the first that must be retried.
 *
 * Across replicas: an attempt is claimed by one atomic UPDATE that sets a
 * lease (`locked_until`) and re-checks it on the locked row, so two
 * replicas never send the same attempt at once; a replica that dies mid-send
 * loses the lease and the attempt is retried. The claim (which also reads
 * the endpoint) and the results of a whole run are one statement each;
 * nothing is held open across the HTTP calls (PGlite has a single
 * connection).
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
  /** Accounts served per pass (default 20). */
  batchSize?: number;
  /**
   * Events of one account sent per pass, one after the other (default 50):
   * a busy account's backlog drains in runs, not one event per pass.
   */
  runLength?: number;
  /** Told each recorded attempt's outcome (a metric). */
  onAttempt?: (outcome: AttemptOutcome) => void;
}

/**
 * What an attempt came to: the endpoint took it, it failed with a retry
 * scheduled, or it failed for the last time (or had no endpoint left).
 */
export type AttemptOutcome = "delivered" | "retrying" | "given_up";

/**
 * The claim: for each account with due events, its oldest pending event (its
 * head) and the events queued right behind it (its run, up to `runLength`),
 * oldest accounts first, leased and counted as an attempt in one atomic
 * statement.
 *
 * The heads are found by walking the pending index one account at a time
 * (each step jumps to the first pending event of the next account id), so a
 * claim reads about one index entry and one row per account with pending
 * events, plus its run, whatever the backlog. The claimed rows are then
 * updated by primary key. (Their status is checked as "neither delivered nor
 * failed", which the table's CHECK makes the same as pending: written as
 * `status = 'pending'` it lets the planner combine the pending index, whose
 * every entry it would then read, with the key lookup.)
 *
 * Asking each pending event instead whether an older one of its account was
 * pending read the whole backlog on every pass: a backlog of N cost about
 * N²/2 index probes (1.4 million for 1,700 events in a benchmark run).
 *
 * The run: an account settling hundreds of payments a second outgrows one
 * event per pass, so a pass takes up to `runLength` events of an account and
 * sends them one after the other. Only the head can have failed before (an
 * event waits until the one before it is delivered or given up), so the rest
 * are fresh. The run is taken only behind a head this statement claimed, and
 * only as far as every event is due: events of one account are never split
 * between two replicas, and none is claimed ahead of an older one.
 *
 * Two replicas may pick the same head. The UPDATE checks the lease again on
 * the row it locks (PostgreSQL re-reads a row another transaction changed
 * before updating it), so the second finds it leased and leaves it, and with
 * it the run behind it.
 */
export function claimDueEvents(
  leaseMs: number,
  batchSize: number,
  runLength = 1,
): RawBuilder<Claimed> {
  const due = sql`next_attempt_at <= now() AND (locked_until IS NULL OR locked_until < now())`;
  const lease = sql`locked_until = now() + ${leaseMs}::int * interval '1 millisecond',
           attempts = attempts + 1`;
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
    ),
    claimed_heads AS (
      UPDATE webhook_events SET ${lease}
       WHERE id = ANY(ARRAY(
               SELECT id FROM heads WHERE ${due} ORDER BY seq LIMIT ${batchSize}::int))
         AND status NOT IN ('delivered', 'failed') AND ${due}
      RETURNING id, account_id, seq, payload, attempts
    ),
    runs AS (
      UPDATE webhook_events SET ${lease}
       WHERE id = ANY(ARRAY(
               SELECT queued.id FROM claimed_heads h
               CROSS JOIN LATERAL (
                 SELECT id FROM (
                   SELECT id, bool_and(${due}) OVER (ORDER BY seq) AS all_due
                     FROM (SELECT id, seq, next_attempt_at, locked_until FROM webhook_events
                            WHERE status = 'pending' AND account_id = h.account_id
                              AND seq > h.seq
                            ORDER BY account_id, seq LIMIT ${runLength - 1}::int) behind
                 ) prefix WHERE all_due) queued))
         AND status NOT IN ('delivered', 'failed') AND ${due}
      RETURNING id, account_id, seq, payload, attempts
    )
    SELECT c.id, c.account_id, c.payload, c.attempts, w.url, w.secret
      FROM (SELECT * FROM claimed_heads UNION ALL SELECT * FROM runs) c
      LEFT JOIN webhook_endpoints w ON w.account_id = c.account_id
     ORDER BY c.seq`;
}

/** A claimed event; a pass gets them oldest first. */
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

/** What became of one claimed event of a run. */
interface RunOutcome {
  event: Claimed;
  /** Absent: not attempted in this pass (its lease and attempt are handed back). */
  attempt?: {
    result: AttemptResult;
    /** `pending`: a retry is scheduled, and the rest of the run waits behind it. */
    state: "delivered" | "failed" | "pending";
    /** Until the retry; null when the event is finished. */
    retryInMs: number | null;
  };
}

const OUTCOME_OF_STATE = {
  delivered: "delivered",
  pending: "retrying",
  failed: "given_up",
} as const satisfies Record<"delivered" | "failed" | "pending", AttemptOutcome>;

/** Delay before the retry that follows attempt `attempt` (1-based). */
function retryDelayMs(attempt: number, baseMs: number, maxMs: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.min(attempt - 1, 30));
}

export class WebhookDeliveryWorker {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;
  private stopped = true;
  /** Set by stop(): a run in progress hands back what it has not sent yet. */
  private stopping = false;
  private readonly pollIntervalMs: number;
  private readonly timeoutMs: number;
  private readonly baseMs: number;
  private readonly maxMs: number;
  private readonly maxAttempts: number;
  private readonly batchSize: number;
  private readonly runLength: number;

  constructor(private readonly opts: WebhookDeliveryOptions) {
    this.pollIntervalMs = opts.pollIntervalMs ?? 1_000;
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    this.baseMs = opts.backoffBaseMs ?? 30_000;
    this.maxMs = opts.backoffMaxMs ?? 4 * 3_600_000;
    this.maxAttempts = opts.maxAttempts ?? 15;
    this.batchSize = opts.batchSize ?? 20;
    this.runLength = Math.max(1, opts.runLength ?? 50);
  }

  start(): void {
    this.stopped = false;
    this.stopping = false;
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.stopping = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }

  /**
   * A pass that attempted something is followed by the next one at once,
   * and only an idle pass waits for the poll interval, so an account with a
   * backlog (a busy merchant: hundreds of settlements a second) is not held
   * to one run per interval while its outbox grows. Failed attempts are not
   * due again before their back-off, so a receiver that is down costs one
   * empty pass, not a busy loop.
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

  /** One pass: claims due events and attempts each at most once. Returns the events claimed. */
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
    // Accounts are delivered side by side; each account's run in order.
    const runs = new Map<string, Claimed[]>();
    for (const event of claimed) {
      const run = runs.get(event.account_id);
      if (run) run.push(event);
      else runs.set(event.account_id, [event]);
    }
    await Promise.all([...runs.values()].map((run) => this.deliverRun(run)));
    return claimed.length;
  }

  private async claim(): Promise<Claimed[]> {
    const res = await claimDueEvents(this.leaseMs(), this.batchSize, this.runLength).execute(
      this.opts.db,
    );
    return res.rows;
  }

  /**
   * The lease outlives a run: sending stops starting new attempts once a run
   * has taken `timeoutMs`, and the attempt under way ends within another
   * `timeoutMs`, so a live worker records its run well before the lease ends.
   */
  private leaseMs(): number {
    return this.timeoutMs * 3 + 5_000;
  }

  /**
   * Sends one account's run oldest first, each event only after the one
   * before it was delivered or given up, then records the whole run in one
   * statement. An attempt that fails with retries left ends the run: the
   * events behind it are handed back untouched, as they are when the run
   * runs out of time or the worker is stopping.
   */
  private async deliverRun(run: Claimed[]): Promise<void> {
    const started = performance.now();
    const outcomes: RunOutcome[] = [];
    let blocked = false;
    for (const event of run) {
      const outOfTime = outcomes.length > 0 && performance.now() - started > this.timeoutMs;
      if (blocked || outOfTime || this.stopping) {
        outcomes.push({ event });
        continue;
      }
      const { url, secret } = event;
      const hasEndpoint = url !== null && secret !== null;
      const result: AttemptResult = hasEndpoint
        ? await this.send(url, secret, event)
        : { url: "", statusCode: null, latencyMs: 0, error: "no webhook endpoint" };
      const ok = result.statusCode !== null && result.statusCode >= 200 && result.statusCode < 300;
      const final = ok || !hasEndpoint || event.attempts >= this.maxAttempts;
      outcomes.push({
        event,
        attempt: {
          result,
          state: ok ? "delivered" : final ? "failed" : "pending",
          retryInMs: final ? null : retryDelayMs(event.attempts, this.baseMs, this.maxMs),
        },
      });
      blocked = !final;
    }
    try {
      await this.record(outcomes);
    } catch (e) {
      this.opts.log.warn(
        { err: describeError(e), eventIds: run.map((event) => event.id) },
        "could not record webhook attempts",
      );
      return;
    }
    for (const { event, attempt } of outcomes) {
      if (!attempt) continue;
      this.opts.onAttempt?.(OUTCOME_OF_STATE[attempt.state]);
      if (attempt.state === "failed")
        this.opts.log.warn(
          { eventId: event.id, accountId: event.account_id, attempts: event.attempts },
          "webhook event given up",
        );
    }
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

  /**
   * Records a run in one statement (atomic like a transaction, at one round
   * trip): an attempt row for each event sent, each sent event's new state,
   * and, for the events not sent, their lease and the attempt the claim
   * counted handed back. An event no longer pending is left as it is.
   */
  private async record(outcomes: readonly RunOutcome[]): Promise<void> {
    const column = <T>(pick: (o: RunOutcome) => T) => outcomes.map(pick);
    const error = (o: RunOutcome) => {
      if (!o.attempt) return null;
      const { result, state } = o.attempt;
      return result.error ?? (state === "delivered" ? null : `HTTP ${result.statusCode}`);
    };
    await sql`
      WITH run AS (
        SELECT * FROM unnest(
          ${column((o) => o.event.id)}::text[],
          ${column((o) => o.attempt?.state ?? null)}::text[],
          ${column((o) => o.attempt?.result.url ?? null)}::text[],
          ${column((o) => o.attempt?.result.statusCode ?? null)}::int[],
          ${column((o) => o.attempt?.result.latencyMs ?? null)}::int[],
          ${column(error)}::text[],
          ${column((o) => o.attempt?.retryInMs ?? null)}::int[]
        ) WITH ORDINALITY
          AS r(id, state, url, status_code, latency_ms, error, retry_in_ms, ord)
      ),
      attempts AS (
        INSERT INTO webhook_deliveries
          (event_id, account_id, attempt, url, status_code, latency_ms, error, next_retry_at)
        SELECT e.id, e.account_id, e.attempts, r.url, r.status_code, r.latency_ms, r.error,
               now() + r.retry_in_ms * interval '1 millisecond'
          FROM run r JOIN webhook_events e ON e.id = r.id
         WHERE r.state IS NOT NULL
         ORDER BY r.ord
      )
      UPDATE webhook_events e
         SET status = coalesce(r.state, e.status),
             finished_at = CASE WHEN r.state IN ('delivered', 'failed') THEN now()
                                ELSE e.finished_at END,
             next_attempt_at = CASE WHEN r.state = 'pending'
                                    THEN now() + r.retry_in_ms * interval '1 millisecond'
                                    ELSE e.next_attempt_at END,
             attempts = CASE WHEN r.state IS NULL THEN e.attempts - 1 ELSE e.attempts END,
             locked_until = NULL
        FROM run r
       WHERE e.id = r.id AND e.status = 'pending'`.execute(this.opts.db);
  }
}
