/**
 * The settlements table's one writer: every settle attempt's record, from
 * intent to outcome.
 *
 * Invariants:
 * - The row is written `pending` before the mechanism may broadcast (a crash
 *   mid-settle leaves a trace to reconcile), and finished before the
 *   response leaves.
 * - One live row (`pending` or `succeeded`) per payment authorization: the
 *   unique index of migration 0008 makes `begin` refuse a second one, so
 *   duplicates join the first attempt instead of sending again.
 * - A row leaves `pending` exactly once (every transition is guarded on
 *   `status = 'pending'`), and its webhook event and its quota charge are
 *   written in the same transaction as that transition, whoever makes it.
 */
import { createHash, randomUUID } from "node:crypto";
import { sql, type Transaction } from "kysely";
import stringify from "safe-stable-stringify";
import type { SettleResponse } from "@x402/core/types";
import type { Db } from "../../storage/db.js";
import type { Database, SettlementRow } from "../../storage/schema.js";
import { ServiceError, describeError } from "../../lib/errors.js";
import type { Logger } from "../../lib/logger.js";
import type { PaymentRequest } from "../../protocol.js";
import type { JournalEntry, PendingSettlement } from "../../chains/ports.js";
import type { ApiKeyPrincipal } from "../keys/authenticator.js";
import type { QuotaReservation } from "../plans/quotaLedger.js";
import { recordSettlementEvent } from "../webhooks/events.js";

/** Stable identity of a signed payment: the same payload always maps here. */
export function paymentFingerprint(req: PaymentRequest): string {
  const canonical = stringify(req.paymentPayload.payload) ?? "";
  return createHash("sha256").update(canonical).digest("hex");
}

/** A payer as claimed by an unverified payload: kept only if it looks like an address. */
function storablePayer(payer: string | undefined): string | null {
  return payer && /^[\x21-\x7e]{1,256}$/.test(payer) ? payer.toLowerCase() : null;
}

/** Quota side effects of a settlement's transitions (absent: not metered). */
export interface SettlementMetering {
  chargeIn(
    tx: Transaction<Database>,
    accountId: string,
    units: number,
    settlementId: string,
  ): Promise<void>;
  releaseIn(tx: Transaction<Database>, reservation: QuotaReservation): Promise<void>;
}

export interface SettleIntent {
  principal: ApiKeyPrincipal;
  request: PaymentRequest;
  authorizationKey: string;
  payer: string | undefined;
  units: number;
}

/** What the chain (or a retry that asked it) says became of a pending row. */
export type ChainOutcome =
  | { status: "succeeded"; transaction: string }
  | { status: "failed"; reason: string; message: string; transaction?: string };

type Finish = {
  status: "succeeded" | "failed" | "pending" | "not_attempted";
  transaction?: string;
  error_reason: string | null;
  error_message: string | null;
  payer?: string | null;
};

export class SettlementRecorder {
  private readonly unjournaled = new Set<string>();

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
    private readonly metering?: SettlementMetering,
  ) {}

  /** The live (pending or succeeded) row of an authorization, if any. */
  async findLive(authorizationKey: string): Promise<SettlementRow | undefined> {
    try {
      return await this.db
        .selectFrom("settlements")
        .selectAll()
        .where("authorization_key", "=", authorizationKey)
        .where("status", "in", ["pending", "succeeded"])
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
   * Writes the intent row. Returns its id, or undefined when a live row for
   * the same authorization exists (the caller joins that one). Fails closed:
   * if it cannot be written, nothing is settled.
   */
  async begin(intent: SettleIntent): Promise<string | undefined> {
    const { principal, request } = intent;
    const id = randomUUID();
    const req = request.paymentRequirements;
    try {
      const inserted = await this.db
        .insertInto("settlements")
        .values({
          id,
          account_id: principal.accountId,
          api_key_id: principal.keyId,
          network: req.network,
          scheme: req.scheme,
          payer: storablePayer(intent.payer),
          pay_to: req.payTo.toLowerCase(),
          asset: req.asset.toLowerCase(),
          amount: req.amount,
          payload_fingerprint: paymentFingerprint(request),
          status: "pending",
          transaction: null,
          error_reason: null,
          error_message: null,
          started_at: new Date(),
          finished_at: null,
          duration_ms: null,
          request: JSON.stringify(request),
          units: intent.units,
          authorization_key: intent.authorizationKey,
        })
        .onConflict((oc) =>
          oc
            .column("authorization_key")
            .where("status", "in", ["pending", "succeeded"])
            .doNothing(),
        )
        .returning("id")
        .executeTakeFirst();
      return inserted ? id : undefined;
    } catch (e) {
      this.log.error({ err: describeError(e) }, "could not record settlement intent");
      throw new ServiceError(
        "service_unavailable",
        "the settlement could not be recorded, so it was not attempted; retry shortly",
        { retryable: true, cause: e },
      );
    }
  }

  /**
   * Journals a transaction before it is broadcast; the settlement's row
   * learns the first one's reference in the same transaction.
   */
  async recordSent(entry: JournalEntry, settlementId: string | undefined): Promise<void> {
    try {
      await this.writeSent(entry, settlementId);
    } catch (e) {
      // Nothing is broadcast without its journal entry, so this settlement
      // sent nothing: remembered so its answer is 503, not a payer's failure.
      if (settlementId) {
        if (this.unjournaled.size > 10_000) this.unjournaled.clear();
        this.unjournaled.add(settlementId);
      }
      throw e;
    }
  }

  /** Whether a journal write failed for this settlement (asked once, then forgotten). */
  takeJournalFailure(settlementId: string): boolean {
    return this.unjournaled.delete(settlementId);
  }

  private async writeSent(entry: JournalEntry, settlementId: string | undefined): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await trx
        .insertInto("settlement_transactions")
        .values({
          reference: entry.reference,
          settlement_id: settlementId ?? null,
          network: entry.network,
          signer: entry.signer?.toLowerCase() ?? null,
          replaces: entry.replaces ?? null,
          detail: JSON.stringify(entry.detail),
        })
        .onConflict((oc) => oc.column("reference").doNothing())
        .execute();
      if (settlementId && !entry.replaces) {
        await trx
          .updateTable("settlements")
          .set({ transaction: entry.reference })
          .where("id", "=", settlementId)
          .where("transaction", "is", null)
          .execute();
      }
    });
  }

  /** The chain's final word on a journaled transaction. */
  async recordFinished(
    reference: string,
    status: "success" | "reverted",
    block?: bigint,
  ): Promise<void> {
    await this.db
      .updateTable("settlement_transactions")
      .set({ status, ...(block !== undefined ? { block_number: block.toString() } : {}) })
      .where("reference", "=", reference)
      .execute();
  }

  /** A pending row with its journaled transactions, as the chain families reconcile it. */
  async pendingSettlement(row: SettlementRow): Promise<PendingSettlement> {
    const txs = await this.db
      .selectFrom("settlement_transactions")
      .select(["reference", "signer", "replaces", "detail"])
      .where("settlement_id", "=", row.id)
      .orderBy("created_at")
      .execute();
    return {
      network: row.network,
      request: row.request as PaymentRequest,
      transactions: txs.map((t) => ({
        network: row.network,
        reference: t.reference,
        ...(t.signer ? { signer: t.signer } : {}),
        ...(t.replaces ? { replaces: t.replaces } : {}),
        detail: (typeof t.detail === "string" ? JSON.parse(t.detail) : t.detail) as Record<
          string,
          unknown
        >,
      })),
    };
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
   * Removes an intent row whose settlement was refused before anything was
   * sent (quota): like any request refused with 402, it leaves no record.
   */
  async withdraw(id: string): Promise<void> {
    await this.db
      .deleteFrom("settlements")
      .where("id", "=", id)
      .where("status", "=", "pending")
      .where("transaction", "is", null)
      .execute();
  }

  /** A duplicate request was answered by this row. Best effort: the answer stands. */
  async countAttempt(id: string): Promise<void> {
    await this.db
      .updateTable("settlements")
      .set({ attempts: sql<number>`attempts + 1` })
      .where("id", "=", id)
      .execute()
      .catch((e: unknown) =>
        this.log.warn({ err: describeError(e), settlementId: id }, "could not count an attempt"),
      );
  }

  /**
   * Finishes the row with the mechanism's outcome and gives the quota
   * reservation back (a success is charged by the transition itself).
   * Retries briefly; a row it cannot finish stays pending for reconciliation.
   */
  async finish(
    id: string,
    result: SettleResponse,
    startedAt: number,
    reservation?: QuotaReservation,
  ): Promise<void> {
    const pending = !result.success && result.errorReason === "settlement_pending";
    await this.transition(
      id,
      {
        status: result.success ? "succeeded" : pending ? "pending" : "failed",
        ...(result.transaction ? { transaction: result.transaction } : {}),
        error_reason: result.success ? null : (result.errorReason ?? null),
        error_message: result.success ? null : (result.errorMessage ?? null),
        ...(storablePayer(result.payer) ? { payer: storablePayer(result.payer) } : {}),
      },
      startedAt,
      reservation,
    );
  }

  /** Nothing was sent because the chain or a store could not be reached: nobody's fault. */
  async notAttempted(
    id: string,
    message: string,
    startedAt: number,
    reservation?: QuotaReservation,
  ): Promise<void> {
    await this.transition(
      id,
      { status: "not_attempted", error_reason: "service_unavailable", error_message: message },
      startedAt,
      reservation,
    );
  }

  /**
   * Records what the chain says became of a pending row (the reconciler, or
   * a retry that asked the chain). Returns the row if this call moved it.
   */
  async finishFromChain(id: string, outcome: ChainOutcome): Promise<SettlementRow | undefined> {
    return this.db.transaction().execute(async (trx) => {
      const row = await trx
        .updateTable("settlements")
        .set({
          status: outcome.status,
          ...(outcome.transaction ? { transaction: outcome.transaction } : {}),
          error_reason: outcome.status === "failed" ? outcome.reason : null,
          error_message: outcome.status === "failed" ? outcome.message : null,
          finished_at: new Date(),
          duration_ms: sql<number>`(extract(epoch from now() - started_at) * 1000)::int`,
        })
        .where("id", "=", id)
        .where("status", "=", "pending")
        .returningAll()
        .executeTakeFirst();
      if (row) await this.afterTransition(trx, row);
      return row;
    });
  }

  private async transition(
    id: string,
    values: Finish,
    startedAt: number,
    reservation: QuotaReservation | undefined,
  ): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.db.transaction().execute(async (trx) => {
          // Guarded: a retry or the reconciler may have learned the outcome
          // from the chain first; that answer stands and is not rewritten.
          const row = await trx
            .updateTable("settlements")
            .set({ ...values, finished_at: new Date(), duration_ms: Date.now() - startedAt })
            .where("id", "=", id)
            .where("status", "=", "pending")
            .returningAll()
            .executeTakeFirst();
          if (row) await this.afterTransition(trx, row);
          if (reservation && this.metering) await this.metering.releaseIn(trx, reservation);
        });
        return;
      } catch (e) {
        if (attempt >= 3) {
          this.log.error(
            { err: describeError(e), settlementId: id, tx: values.transaction },
            "could not record settlement outcome",
          );
          return;
        }
        await new Promise((r) => setTimeout(r, 50 * attempt));
      }
    }
  }

  /** The outbox event and the quota charge that belong to a row's final state. */
  private async afterTransition(trx: Transaction<Database>, row: SettlementRow): Promise<void> {
    if (row.status === "pending" || row.status === "not_attempted") return;
    await recordSettlementEvent(trx, row);
    // A success that sent nothing (an `upto` settled at zero) moved no money
    // and is not billed.
    if (row.status !== "succeeded" || !row.transaction || row.billed || !this.metering) return;
    await this.metering.chargeIn(trx, row.account_id, row.units, row.id);
    await trx.updateTable("settlements").set({ billed: true }).where("id", "=", row.id).execute();
  }
}
