/**
 * One replica at a time sends with the vault's operator key (issue 37): a
 * lease in the database (`confidential_operator_lease`, one row), taken
 * before each operator transaction and given up after its receipt, renewed
 * while held. Every replica enables merchants, submits withdrawals and runs
 * the worker, and each operator transaction takes the account's next nonce:
 * without the lease two replicas would send with the same nonce, and two
 * workers would finalize the same withdrawal.
 *
 * Times are the database's (`now()`), so replicas with skewed clocks agree.
 * A replica that dies holding it leaves a lease that runs out after `ttlMs`.
 *
 * A holder that cannot renew stops sending, as the batch lease does: a
 * renewal that fails (an error, or the row is someone else's) marks the
 * lease lost, and one that does not answer (a stalled database) lets the
 * term run out on this process's own clock, counted from before the last
 * successful renewal was sent and less a margin, so it runs out here before
 * it can in the database. Either way `ensureHeld` throws before the next
 * transaction: another replica may hold the key by then.
 */
import type { Kysely } from "kysely";
import { sql } from "kysely";
import { ServiceError } from "../../lib/errors.js";
import type { Database } from "../../storage/schema.js";
import type { OperatorKeyHold, OperatorKeyLease } from "../../chains/confidentialPort.js";

/** The lease may be another replica's: nothing more is sent under this hold. */
export class OperatorLeaseLost extends ServiceError {
  constructor(why: string) {
    super(
      "service_unavailable",
      `the confidential vault's operator key lease was lost (${why}); nothing more is sent with it until it is taken again`,
      { retryable: true },
    );
  }
}

export interface DbOperatorLeaseOptions {
  /** This replica. */
  holder: string;
  /** How long the lease holds unrenewed. */
  ttlMs?: number;
  /** How long to wait for another holder to finish before giving up (503). */
  waitMs?: number;
}

export class DbOperatorLease implements OperatorKeyLease {
  private readonly ttlMs: number;
  private readonly waitMs: number;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly opts: DbOperatorLeaseOptions,
  ) {
    this.ttlMs = opts.ttlMs ?? 30_000;
    this.waitMs = opts.waitMs ?? 120_000;
  }

  async hold<T>(work: (held: OperatorKeyHold) => Promise<T>): Promise<T> {
    // The term as this process counts it: from before the query that took
    // or renewed the lease, less a tenth for clock rates and the time a
    // transaction takes to reach the node.
    const margin = this.ttlMs / 10;
    let sentAt = performance.now();
    await this.acquire(() => (sentAt = performance.now()));
    let validUntil = sentAt + this.ttlMs - margin;
    let lost: string | null = null;
    const renew = setInterval(() => {
      if (lost) return;
      const at = performance.now();
      this.renew().then(
        (renewed) => {
          if (renewed) validUntil = Math.max(validUntil, at + this.ttlMs - margin);
          else lost ??= "another replica holds it";
        },
        () => (lost ??= "a renewal failed"),
      );
    }, this.ttlMs / 3);
    renew.unref();
    const held: OperatorKeyHold = {
      ensureHeld: () => {
        if (!lost && performance.now() >= validUntil) lost = "no renewal within its term";
        if (lost) throw new OperatorLeaseLost(lost);
      },
    };
    try {
      return await work(held);
    } finally {
      clearInterval(renew);
      await this.db
        .updateTable("confidential_operator_lease")
        .set({ holder: null, expires_at: sql<Date>`'-infinity'` })
        .where("id", "=", 1)
        .where("holder", "=", this.opts.holder)
        .execute()
        .catch(() => undefined); // it runs out by itself
    }
  }

  /** Takes the lease; `trying` is told right before each attempt is sent. */
  private async acquire(trying: () => void): Promise<void> {
    const deadline = Date.now() + this.waitMs;
    for (let pause = 20; ; pause = Math.min(pause * 2, 250)) {
      trying();
      if (await this.take()) return;
      if (Date.now() > deadline) {
        throw new ServiceError(
          "service_unavailable",
          "the confidential vault's operator key is busy on another replica; retry shortly",
          { retryable: true },
        );
      }
      await new Promise((r) => setTimeout(r, pause + Math.random() * pause));
    }
  }

  /**
   * Extends the lease only while the row still names this holder: one that
   * was released or taken meanwhile is not taken back by a late renewal.
   */
  private async renew(): Promise<boolean> {
    const row = await this.db
      .updateTable("confidential_operator_lease")
      .set({ expires_at: sql<Date>`now() + ${`${this.ttlMs} milliseconds`}::interval` })
      .where("id", "=", 1)
      .where("holder", "=", this.opts.holder)
      .returning("id")
      .executeTakeFirst();
    return row !== undefined;
  }

  /** Takes (or renews) the lease when it is free, expired or already this holder's. */
  private async take(): Promise<boolean> {
    const row = await this.db
      .updateTable("confidential_operator_lease")
      .set({
        holder: this.opts.holder,
        expires_at: sql<Date>`now() + ${`${this.ttlMs} milliseconds`}::interval`,
      })
      .where("id", "=", 1)
      .where(({ eb, or }) =>
        or([eb("expires_at", "<", sql<Date>`now()`), eb("holder", "=", this.opts.holder)]),
      )
      .returning("id")
      .executeTakeFirst();
    return row !== undefined;
  }
}
