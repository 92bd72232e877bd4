/**
 * The transaction journal's rows (settlement_transactions): each entry
 * written before its transaction is broadcast, the chain's final word on
 * it, and the reads of both (a pending settlement's transactions for its
 * reconciliation, what failed transactions cost for the failed-fee
 * budget). Entries are written through group commit, like the recorder's,
 * and in the lanes of settles in flight (see `OpenedDb`).
 */
import { sql } from "kysely";
import type {
  FailedFeeExposure,
  FailureCause,
  JournalEntry,
  PendingSettlement,
} from "../../chains/ports.js";
import type { Db } from "../../storage/db.js";
import { DEFAULT_MAX_BATCH, GroupCommit } from "../../storage/groupCommit.js";
import type { SettlementRow } from "../../storage/schema.js";
import type { Logger } from "../../lib/logger.js";
import type { PaymentRequest } from "../../protocol/index.js";
import {
  dropSignedMaterial,
  journalMined,
  journalSent,
  type MinedTransaction,
  type SentTransaction,
} from "./settlementWrites.js";

/**
 * A transaction was about to be sent for a settlement whose record is
 * already final without it (the reconciler, or a retry that asked the
 * chain, judged it interrupted): the record stands, and nothing is sent.
 */
export class SettlementDecidedError extends Error {
  constructor(readonly settlementId: string) {
    super(
      "this settlement was already recorded as finished while it ran (interrupted, nothing sent); nothing more is sent for it",
    );
    this.name = "SettlementDecidedError";
  }
}

/** A journal row as a reconciliation reads it. */
interface JournaledTransaction {
  reference: string;
  signer: string | null;
  replaces: string | null;
  detail: unknown;
  failure_cause: FailureCause | null;
}

export class JournalRecords {
  private readonly sent: GroupCommit<SentTransaction, undefined>;
  private readonly mined: GroupCommit<MinedTransaction, undefined>;
  private readonly journalReads: GroupCommit<string, JournaledTransaction[]>;

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
    /** The lane of the writes that answer settles in flight (a transaction's receipt). */
    private readonly finishing: Db = db,
    /** The lane of a transaction's journal entry, the last step before it leaves. */
    private readonly sending: Db = finishing,
  ) {
    const opts = { maxBatch: DEFAULT_MAX_BATCH };
    // A journal entry is the last step before its transaction leaves, for
    // a settle already in flight (on Starknet, inside an executor's turn,
    // which the executor's next send waits for): the sending lane.
    this.sent = new GroupCommit(async (sent) => {
      const open = await journalSent(this.sending, sent);
      const refused = sent.flatMap((s) =>
        s.settlementId && !open.has(s.settlementId) ? [s.settlementId] : [],
      );
      // Rare (a settle judged while it ran): which of them are final rows,
      // and which no row at all (an id that was never a settlement's).
      const decided =
        refused.length === 0
          ? new Set<string>()
          : new Set(
              (
                await this.sending
                  .selectFrom("settlements")
                  .select("id")
                  .where("id", "in", refused)
                  .execute()
              ).map((r) => r.id),
            );
      return sent.map((s) => {
        if (!s.settlementId || open.has(s.settlementId)) {
          return { status: "fulfilled", value: undefined } as const;
        }
        const reason = decided.has(s.settlementId)
          ? new SettlementDecidedError(s.settlementId)
          : new Error(`no settlement ${s.settlementId} to journal a transaction for`);
        return { status: "rejected", reason } as const;
      });
    }, opts);
    this.mined = new GroupCommit(async (mined) => {
      await journalMined(this.finishing, mined);
      return mined.map(() => ({ status: "fulfilled", value: undefined }) as const);
    }, opts);
    // The success watcher and the reconciler ask for several settlements'
    // journals at a time: one statement reads them all.
    this.journalReads = new GroupCommit(async (ids) => {
      const byId = await this.readJournals(ids);
      return ids.map((id) => ({ status: "fulfilled", value: byId.get(id) ?? [] }) as const);
    }, opts);
  }

  /**
   * Journals a transaction before it is broadcast; the settlement's row
   * learns the first one's reference in the same statement. Throws
   * `SettlementDecidedError`, and journals nothing, when the settlement was
   * already recorded failed: it must not be broadcast.
   */
  async recordSent(entry: JournalEntry, settlementId: string | undefined): Promise<void> {
    await this.sent.submit({ entry, settlementId });
  }

  /** The chain's final word on a journaled transaction. */
  async recordFinished(
    reference: string,
    status: "success" | "reverted",
    block?: bigint,
    fee?: bigint,
    cause?: FailureCause,
  ): Promise<void> {
    await this.mined.submit({ reference, status, block, fee, cause });
  }

  /**
   * The chain's word on transactions a settle collected for its outcome's
   * statement when no outcome took them (the settle threw, or its outcome
   * could not be written): written on their own. Never throws.
   */
  async recordAllFinished(finished: readonly MinedTransaction[]): Promise<void> {
    await Promise.all(
      finished.map((f) =>
        this.mined.submit(f).catch((e: unknown) => this.journalWriteLost(f.reference, e)),
      ),
    );
  }

  /**
   * The chain's word on a transaction could not be journaled while its
   * settlement's outcome (the record that answers) was written: its entry
   * stays `sent`, which counts its worst fee against the failed-fee budget
   * until its hour is over.
   */
  journalWriteLost(reference: string, e: unknown): void {
    this.log.error(
      { err: String(e), transaction: reference },
      "could not journal a transaction's outcome; its settlement's outcome is recorded",
    );
  }

  /** A pending row with its journaled transactions, as the chain families reconcile it. */
  async pendingSettlement(row: SettlementRow): Promise<PendingSettlement> {
    const txs = await this.journalReads.submit(row.id);
    return {
      id: row.id,
      network: row.network,
      request: row.request as PaymentRequest,
      transactions: txs.map((t) => ({
        network: row.network,
        reference: t.reference,
        ...(t.signer ? { signer: t.signer } : {}),
        ...(t.replaces ? { replaces: t.replaces } : {}),
        ...(t.failure_cause ? { cause: t.failure_cause } : {}),
        detail: (typeof t.detail === "string" ? JSON.parse(t.detail) : t.detail) as Record<
          string,
          unknown
        >,
      })),
    };
  }

  /** The journaled transactions of each settlement, oldest first. */
  private async readJournals(ids: readonly string[]): Promise<Map<string, JournaledTransaction[]>> {
    const rows = await this.db
      .selectFrom("settlement_transactions")
      .select(["settlement_id", "reference", "signer", "replaces", "detail", "failure_cause"])
      .where("settlement_id", "in", [...new Set(ids)])
      .orderBy("created_at")
      .execute();
    const byId = new Map<string, JournaledTransaction[]>();
    for (const r of rows) {
      if (r.settlement_id === null) continue;
      const list = byId.get(r.settlement_id) ?? [];
      list.push(r);
      byId.set(r.settlement_id, list);
    }
    return byId;
  }

  /**
   * For the transactions of `network` journaled since `since`, by every
   * replica: what failed ones cost their senders (every mined transaction
   * of a settlement recorded failed, a reverted one of any), and what those
   * still in flight could cost at most (a version a fee bump replaced
   * counts through its replacement only); in all, and per submitting
   * account, with when the oldest failed one was journaled.
   */
  async failedFeeExposure(network: string, since: Date): Promise<FailedFeeExposure> {
    const { rows } = await sql<{
      account_id: string | null;
      failed: string | null;
      in_flight: string | null;
      oldest: Date | string | null;
    }>`
      select s.account_id,
        sum(t.fee) filter (where t.status = 'reverted'
          or (t.status = 'success' and s.status = 'failed')) as failed,
        sum(t.worst_fee) filter (where t.status = 'sent' and not exists (
          select 1 from settlement_transactions r where r.replaces = t.reference)) as in_flight,
        min(t.created_at) filter (where t.status = 'reverted'
          or (t.status = 'success' and s.status = 'failed')) as oldest
      from settlement_transactions t
      left join settlements s on s.id = t.settlement_id
      where t.network = ${network} and t.created_at >= ${since}
      group by s.account_id`.execute(this.db);
    const accounts = new Map<string, { failed: bigint; inFlight: bigint }>();
    const figures: FailedFeeExposure & { accounts: typeof accounts } = {
      reverted: 0n,
      inFlight: 0n,
      accounts,
    };
    for (const row of rows) {
      const failed = BigInt(row.failed ?? 0);
      const inFlight = BigInt(row.in_flight ?? 0);
      figures.reverted += failed;
      figures.inFlight += inFlight;
      if (row.account_id) figures.accounts.set(row.account_id, { failed, inFlight });
      const oldest = row.oldest === null ? undefined : new Date(row.oldest);
      if (oldest && (!figures.oldestFailure || oldest < figures.oldestFailure)) {
        figures.oldestFailure = oldest;
      }
    }
    return figures;
  }

  /**
   * Drops the signed bytes no reorg watch needs any more (see
   * `dropSignedMaterial`), but those of the settlements in `keep`.
   */
  async dropSignedMaterial(before: Date, keep: readonly string[] = []): Promise<void> {
    await dropSignedMaterial(this.db, before, keep);
  }
}
