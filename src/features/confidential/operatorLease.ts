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
 */
import type { Kysely } from "kysely";
import { sql } from "kysely";
import { ServiceError } from "../../lib/errors.js";
import type { Database } from "../../storage/schema.js";
import type { OperatorKeyLease } from "../../chains/confidentialPort.js";

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

  async hold<T>(work: () => Promise<T>): Promise<T> {
    await this.acquire();
    const renew = setInterval(() => void this.take().catch(() => undefined), this.ttlMs / 3);
    renew.unref();
    try {
      return await work();
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

  private async acquire(): Promise<void> {
    const deadline = Date.now() + this.waitMs;
    for (let pause = 20; ; pause = Math.min(pause * 2, 250)) {
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
