/**
 * A flush of settles' outcomes (group commit), as the recorder writes it:
 * in one statement (outcomeStatement.ts) or, when the quota needs it, in
 * one transaction; then which requests hold their success answer.
 */
import type { Transaction } from "kysely";
import type { Db } from "../../storage/db.js";
import type { Database } from "../../storage/schema.js";
import { describeError } from "../../lib/errors.js";
import type { Logger } from "../../lib/logger.js";
import type { QuotaReservation } from "../plans/quotaLedger.js";
import { outcomeStatement, type MovedOutcome } from "./outcomeStatement.js";
import {
  journalMinedStatement,
  transitionRows,
  type MinedTransaction,
  type RowTransition,
} from "./settlementWrites.js";
import { afterTransitions, type SettlementMetering } from "./transitionEffects.js";

/** What a settle learned, to be written over its pending row. */
export type Outcome = Pick<
  RowTransition,
  | "status"
  | "transaction"
  | "errorReason"
  | "errorMessage"
  | "payer"
  | "settledAmount"
  | "answeredTo"
>;

/** One settle's outcome write, as the recorder's group commit collects it. */
export interface OutcomeWrite {
  id: string;
  outcome: Outcome;
  startedAt: number;
  reservation: QuotaReservation | undefined;
  /** The chain's word on its transactions, written in the same statement. */
  finished: readonly MinedTransaction[];
}

/** What a flush writes with. */
export interface OutcomeDeps {
  /** The lane of the writes that answer settles in flight. */
  db: Db;
  metering: SettlementMetering | undefined;
  log: Logger;
}

/**
 * One flush of outcomes: the chain's word on their transactions, the
 * guarded transitions, the outbox events and quota charges of the rows
 * that moved, and the reservations given back, in one statement
 * (outcomeStatement.ts), or in one transaction when the quota needs it.
 * Returns the ids whose success answer the writing request now holds.
 */
export async function writeOutcomes(
  deps: OutcomeDeps,
  writes: readonly OutcomeWrite[],
): Promise<Set<string>> {
  const now = new Date();
  // Guarded: a retry or the reconciler may have learned the outcome
  // from the chain first; that answer stands and is not rewritten.
  const transitions = writes.map((w) => ({
    id: w.id,
    ...w.outcome,
    finishedAt: now,
    durationMs: now.getTime() - w.startedAt,
  }));
  const finished = writes.flatMap((w) => w.finished);
  const reservations = writes.flatMap((w) => (w.reservation ? [w.reservation] : []));
  const one = outcomeStatement({ transitions, finished, reservations }, deps.metering);
  if (!one) {
    return deps.db.transaction().execute(async (trx) => {
      if (finished.length > 0) await journalMinedStatement(finished).execute(trx);
      const moved = await transitionRows(trx, transitions, {
        markBilled: deps.metering !== undefined,
      });
      await afterTransitions(deps.metering, trx, moved, reservations, "marked");
      return answeredOf(trx, writes, moved, now);
    });
  }
  const moved = (await one.statement.execute(deps.db)).rows;
  await billPaygLate(deps, moved, one.month);
  return answeredOf(deps.db, writes, moved, now);
}

/**
 * Which writes' requests hold their success answer: those whose row this
 * flush moved to `succeeded` for them, and those whose success was
 * recorded first by someone else (a retry or the reconciler that read the
 * chain) while nobody was answered yet, or by this very write on an
 * earlier try whose acknowledgement was lost (the connection broke after
 * the commit): the answer it recorded is this request's still.
 */
async function answeredOf(
  db: Db | Transaction<Database>,
  writes: readonly OutcomeWrite[],
  moved: readonly { id: string; status: string; success_request_id: string | null }[],
  now: Date,
): Promise<Set<string>> {
  const answered = new Set(
    moved.filter((r) => r.status === "succeeded" && r.success_request_id).map((r) => r.id),
  );
  const movedIds = new Set(moved.map((r) => r.id));
  const late = writes.filter((w) => w.outcome.answeredTo !== null && !movedIds.has(w.id));
  for (const w of late) {
    const claimed = await db
      .updateTable("settlements")
      .set({ success_answered_at: now, success_request_id: w.outcome.answeredTo })
      .where("id", "=", w.id)
      .where("status", "=", "succeeded")
      .where((eb) =>
        eb.or([
          eb("success_answered_at", "is", null),
          eb("success_request_id", "=", w.outcome.answeredTo),
        ]),
      )
      .returning("id")
      .executeTakeFirst();
    if (claimed) answered.add(w.id);
  }
  return answered;
}

/**
 * Pay-as-you-go charges the one statement could not bill: an account whose
 * plan became pay-as-you-go while its settles ran (a reservation made
 * under it takes the transaction instead). Rare; a failure is logged, and
 * the units stay counted.
 */
async function billPaygLate(
  deps: OutcomeDeps,
  moved: readonly MovedOutcome[],
  month: string | undefined,
): Promise<void> {
  const late = moved.filter((r) => r.billed && r.quota_plan === "payg");
  if (!deps.metering || !month || late.length === 0) return;
  try {
    await deps.metering.billPaygAfter(
      late.map((r) => ({ accountId: r.account_id, units: r.units, settlementId: r.id })),
      month,
      new Map(late.map((r) => [r.account_id, { used: r.quota_used ?? 0, plan: r.quota_plan }])),
    );
  } catch (e) {
    deps.log.error({ err: describeError(e) }, "could not bill pay-as-you-go charges");
  }
}
