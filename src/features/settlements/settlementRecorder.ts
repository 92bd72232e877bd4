/**
 * Records every settle attempt.
 *
 * The row is written as `pending` before the mechanism may broadcast (so a
 * crash mid-settle leaves a trace to reconcile), and finished with the
 * outcome before the response leaves.
 */
import { createHash, randomUUID } from "node:crypto";
import stringify from "safe-stable-stringify";
import type { SettleResponse } from "@x402/core/types";
import { settlementUnits } from "../plans/plans.js";
import type { Db } from "../../storage/db.js";
import type { SettlementRow } from "../../storage/schema.js";
import { ServiceError, describeError } from "../../lib/errors.js";
import type { Logger } from "../../lib/logger.js";
import { payerOf, type PaymentRequest } from "../../facilitator/paymentFacilitator.js";
import type { ApiKeyPrincipal } from "../keys/authenticator.js";
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

export interface SettleAttempt {
  principal: ApiKeyPrincipal;
  request: PaymentRequest;
}

export class SettlementRecorder {
  constructor(
    private readonly db: Db,
    private readonly log: Logger,
  ) {}

  /** Writes the intent row. Fails closed: if it cannot be written, nothing is settled. */
  async begin({ principal, request }: SettleAttempt): Promise<string> {
    const id = randomUUID();
    const req = request.paymentRequirements;
    try {
      await this.db
        .insertInto("settlements")
        .values({
          id,
          account_id: principal.accountId,
          api_key_id: principal.keyId,
          network: req.network,
          scheme: req.scheme,
          payer: storablePayer(payerOf(request.paymentPayload)),
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
          units: settlementUnits(request),
        })
        .execute();
    } catch (e) {
      this.log.error({ err: describeError(e) }, "could not record settlement intent");
      throw new ServiceError(
        "service_unavailable",
        "the settlement could not be recorded, so it was not attempted; retry shortly",
        {
          retryable: true,
          cause: e,
        },
      );
    }
    return id;
  }

  /** Finishes the row with the outcome. Retries briefly; a pending row is left for reconciliation. */
  async finish(id: string, result: SettleResponse, startedAt: number): Promise<void> {
    const pending = !result.success && result.errorReason === "settlement_pending";
    const values = {
      status: result.success
        ? ("succeeded" as const)
        : pending
          ? ("pending" as const)
          : ("failed" as const),
      ...(result.transaction ? { transaction: result.transaction } : {}),
      error_reason: result.success ? null : (result.errorReason ?? null),
      error_message: result.success ? null : (result.errorMessage ?? null),
      finished_at: new Date(),
      duration_ms: Date.now() - startedAt,
      ...(storablePayer(result.payer) ? { payer: storablePayer(result.payer) } : {}),
    };
    for (let attempt = 1; ; attempt++) {
      try {
        // The outcome and its webhook event (outbox) commit together.
        await this.db.transaction().execute(async (trx) => {
          const row = await trx
            .updateTable("settlements")
            .set(values)
            .where("id", "=", id)
            .returningAll()
            .executeTakeFirst();
          if (row) await recordSettlementEvent(trx, row);
        });
        return;
      } catch (e) {
        if (attempt >= 3) {
          this.log.error(
            { err: describeError(e), settlementId: id, tx: result.transaction },
            "could not record settlement outcome",
          );
          return;
        }
        await new Promise((r) => setTimeout(r, 50 * attempt));
      }
    }
  }
}

export async function listSettlements(
  db: Db,
  accountId: string,
  limit = 50,
): Promise<SettlementRow[]> {
  return db
    .selectFrom("settlements")
    .selectAll()
    .where("account_id", "=", accountId)
    .orderBy("started_at", "desc")
    .limit(limit)
    .execute();
}
