/**
 * The settlement records as the verify path and the workers read them: the
 * live row of an authorization (with its payer's cooling, in one statement
 * shared by concurrent verifications), a row by id, the successes a reorg
 * could still take back, and the pending rows that lost their owner. Only
 * reads: the settlements table's one writer is the recorder.
 */
import { sql, type Kysely } from "kysely";
import type { Db } from "../../storage/db.js";
import { DEFAULT_MAX_BATCH, GroupCommit } from "../../storage/groupCommit.js";
import type { Database, SettlementRow } from "../../storage/schema.js";
import { ServiceError, describeError } from "../../lib/errors.js";
import type { Logger } from "../../lib/logger.js";
import { storablePayer } from "./fingerprints.js";
import { HOLDS_AUTHORIZATION } from "./settlementWrites.js";

/** A verify's look-up: an authorization, and a payer (stored spelling) to check for cooling. */
interface LiveRead {
  key: string;
  payer?: string;
  since?: Date;
}

/** What a verify's look-up found. */
export interface LiveLookup {
  /** The authorization's live row, if any. */
  row: SettlementRow | undefined;
  /** When the payer's latest own on-chain failure ended, if after the `since` asked. */
  payerFailedAt: Date | undefined;
  /**
   * Whether the payer has a settlement that succeeded with a transaction on
   * record (on any network, for any account); undefined when no payer was
   * checked.
   */
  payerKnown: boolean | undefined;
}

export class SettlementReads {
  private readonly liveReads: GroupCommit<LiveRead, LiveLookup>;

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
  ) {
    // Verifications ask for the records of the payments they check, and
    // whether their payers are cooling: the look-ups of concurrent
    // verifications share one statement.
    this.liveReads = new GroupCommit((reads) => this.readLive(reads), {
      maxBatch: DEFAULT_MAX_BATCH,
    });
  }

  /**
   * The live row of an authorization, if any, and, when `cooling` is given,
   * when its payer's own on-chain failure ended if later than `since` (as
   * `payerFailedSince`), read together with the look-ups of concurrent
   * callers: the verify path's one database read.
   */
  lookUpLive(
    authorizationKey: string,
    cooling?: { network: string; payer: string | undefined; since: Date },
  ): Promise<LiveLookup> {
    const payer = cooling ? storablePayer(cooling.network, cooling.payer) : null;
    return this.liveReads.submit({
      key: authorizationKey,
      ...(payer && cooling ? { payer, since: cooling.since } : {}),
    });
  }

  private async readLive(
    reads: readonly LiveRead[],
  ): Promise<readonly PromiseSettledResult<LiveLookup>[]> {
    const keys = [...new Set(reads.map((r) => r.key))];
    const checked = reads.filter((r) => r.payer !== undefined);
    const live = this.db
      .selectFrom("settlements")
      .selectAll()
      .where("authorization_key", "in", keys)
      .where(HOLDS_AUTHORIZATION);
    const rows: SettlementRow[] = [];
    const lastFailure = new Map<string, Date>();
    const known = new Set<string>();
    if (checked.length === 0) {
      rows.push(...(await live.execute()));
    } else {
      // One statement answers both: the live rows, and beside them (a full
      // join that never matches) each checked payer's latest failure of its
      // own since the earliest `since` asked; each caller compares it with
      // its own.
      const since = new Date(Math.min(...checked.map((r) => r.since!.getTime())));
      const payers = [...new Set(checked.map((r) => r.payer!))];
      const found = await this.db
        .with("live", () => live)
        .with("cooling", (db) =>
          db
            .selectFrom("settlements")
            .select((eb) => ["payer", eb.fn.max("finished_at").as("last")])
            .where("payer", "in", payers)
            .where("status", "=", "failed")
            .where("transaction", "is not", null)
            .where("failure_cause", "=", "payer")
            .where("finished_at", ">", since)
            .groupBy("payer"),
        )
        // The checked payers with a success on record: one probe of the
        // partial index of successes (0039) per payer, which stops at the
        // first entry, so a payer's thousandth payment costs what its
        // second does (a `distinct` over the index read every success of
        // every payer asked).
        .with("known", (db) =>
          db
            .selectFrom(sql<{ payer: string }>`unnest(${payers}::text[])`.as<"p">(sql`p(payer)`))
            .select("p.payer")
            .where((eb) =>
              eb.exists(
                eb
                  .selectFrom("settlements as s")
                  .select(sql<number>`1`.as("one"))
                  .whereRef("s.payer", "=", "p.payer")
                  .where("s.status", "=", "succeeded")
                  .where("s.transaction", "is not", null),
              ),
            ),
        )
        .selectFrom("live")
        .fullJoin("cooling", (join) => join.on(sql<boolean>`false`))
        .fullJoin("known", (join) => join.on(sql<boolean>`false`))
        .selectAll("live")
        .select([
          "cooling.payer as cooling_payer",
          "cooling.last as cooling_last",
          "known.payer as known_payer",
        ])
        .execute();
      for (const { cooling_payer, cooling_last, known_payer, ...row } of found) {
        if (known_payer !== null) {
          known.add(known_payer);
        } else if (cooling_payer !== null && cooling_last !== null) {
          lastFailure.set(cooling_payer, new Date(cooling_last as unknown as string));
        } else {
          rows.push(row as SettlementRow);
        }
      }
    }
    const byKey = new Map(rows.map((r) => [r.authorization_key, r]));
    return reads.map((r) => {
      const last = r.payer !== undefined ? lastFailure.get(r.payer) : undefined;
      return {
        status: "fulfilled",
        value: {
          row: byKey.get(r.key),
          payerFailedAt: last && last > r.since! ? last : undefined,
          payerKnown: r.payer !== undefined ? known.has(r.payer) : undefined,
        },
      } as const;
    });
  }

  /** The live row (pending, or succeeded with a transaction) of an authorization, if any. */
  async findLive(authorizationKey: string): Promise<SettlementRow | undefined> {
    try {
      return await this.db
        .selectFrom("settlements")
        .selectAll()
        .where("authorization_key", "=", authorizationKey)
        .where(HOLDS_AUTHORIZATION)
        .executeTakeFirst();
    } catch (e) {
      this.log.error({ err: describeError(e) }, "could not read settlement records");
      throw new ServiceError(
        "service_unavailable",
        "the settlement records could not be read, so nothing was attempted; retry shortly",
        { retryable: true, cause: e },
      );
    }
  }

  async get(id: string): Promise<SettlementRow | undefined> {
    return this.db.selectFrom("settlements").selectAll().where("id", "=", id).executeTakeFirst();
  }

  /**
   * Settlements that succeeded with a transaction since `since`, newest
   * first (a reorg takes the newest blocks first): the ones a reorg could
   * still take back.
   */
  async recentSuccesses(
    since: Date,
    limit: number,
    /** The last row of the page before: this page holds the ones older than it. */
    after?: { finished_at: Date | null; id: string },
    /** Only these networks' (absent: every network's; never empty). */
    networks?: readonly string[],
  ): Promise<SettlementRow[]> {
    return recentSuccessesQuery(this.db, since, limit, after, networks).execute();
  }

  /** Pending rows at least as old as `olderThan` (they have lost their owner), oldest first. */
  async orphaned(olderThan: Date, limit: number): Promise<SettlementRow[]> {
    return this.db
      .selectFrom("settlements")
      .selectAll()
      .where("status", "=", "pending")
      .where("started_at", "<=", olderThan)
      .orderBy("started_at")
      .limit(limit)
      .execute();
  }

  /**
   * Per network, the settlements still `pending` that started at or before
   * `olderThan`: how many, and when the oldest started (the metrics of
   * settlements stuck past the reconciler's horizon). Reads the partial
   * index of pending rows only.
   */
  async pendingStartedBefore(
    olderThan: Date,
  ): Promise<{ network: string; count: number; oldest: Date }[]> {
    const rows = await this.db
      .selectFrom("settlements")
      .select(["network"])
      .select(sql<number>`count(*)::int`.as("count"))
      .select(sql<Date>`min(started_at)`.as("oldest"))
      .where("status", "=", "pending")
      .where("started_at", "<=", olderThan)
      .groupBy("network")
      .execute();
    return rows.map((r) => ({ network: r.network, count: r.count, oldest: new Date(r.oldest) }));
  }
}

/**
 * The reorg watch's read (`SettlementReads.recentSuccesses`), answered
 * from the partial index of successes by the time they finished (0035):
 * the watch runs every few seconds, and the table holds every settlement
 * ever recorded.
 */
export function recentSuccessesQuery(
  db: Kysely<Database>,
  since: Date,
  limit: number,
  after?: { finished_at: Date | null; id: string },
  networks?: readonly string[],
) {
  let q = db
    .selectFrom("settlements")
    .selectAll()
    .where("status", "=", "succeeded")
    .where("transaction", "is not", null)
    .where("finished_at", ">=", since);
  if (networks) q = q.where("network", "in", networks);
  if (after?.finished_at) {
    q = q.where((eb) =>
      eb.or([
        eb("finished_at", "<", after.finished_at!),
        eb.and([eb("finished_at", "=", after.finished_at!), eb("id", "<", after.id)]),
      ]),
    );
  }
  return q.orderBy("finished_at", "desc").orderBy("id", "desc").limit(limit);
}
