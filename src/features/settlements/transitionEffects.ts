/**
 * What a settlement row's final state brings with it, written in the same
 * transaction as the transition that reached it, whoever makes it (a
 * settle's outcome, the reconciler, a retry that asked the chain): its
 * webhook event in the outbox, and its quota charge, with the reservations
 * its settle held given back.
 */
import type { RawBuilder, Transaction } from "kysely";
import type { Database, SettlementOutcomeRow } from "../../storage/schema.js";
import type { QuotaCharge, QuotaReservation } from "../plans/quotaLedger.js";
import { recordSettlementEvents } from "../webhooks/events.js";

/** Quota side effects of settlements' transitions (absent: not metered). */
export interface SettlementMetering {
  /** Charges successes and gives reservations back, in the caller's transaction. */
  chargeAndReleaseIn(
    tx: Transaction<Database>,
    charges: readonly QuotaCharge[],
    reservations: readonly QuotaReservation[],
  ): Promise<void>;
  /**
   * The quota part of the one statement that records settles' outcomes
   * (outcomeStatement.ts), or undefined when they must be written in a
   * transaction (pay-as-you-go reservations).
   */
  outcomeCharges(
    moved: string,
    reservations: readonly QuotaReservation[],
  ): { ctes: RawBuilder<unknown>; month: string } | undefined;
  /**
   * The quota part of the statement that writes settles' intents: CTEs
   * that reserve what the relation `asked` asks (one row an account:
   * `account_id`, `units`, `pending`, `networks`) and return `reserved`
   * (`account_id`, `plan`) for each account granted, in `month`.
   */
  reservationPart(asked: string): { ctes: RawBuilder<unknown>; month: string };
  /** A settle's reservation that `reservationPart` granted. */
  reservationOf(
    accountId: string,
    month: string,
    units: number,
    plan: string | null,
  ): QuotaReservation;
  /** Pay-as-you-go charges for an account whose plan changed while its settles ran. */
  billPaygAfter(
    charges: readonly QuotaCharge[],
    month: string,
    usedAfter: ReadonlyMap<string, { used: number; plan: string | null }>,
  ): Promise<void>;
  /** Takes back a revoked success's charge (units, and a pay-as-you-go amount), in the caller's transaction. */
  revokeChargeIn(
    tx: Transaction<Database>,
    settlement: { id: string; account_id: string; units: number; finished_at: Date | null },
  ): Promise<void>;
}

/**
 * The outbox events and the quota charges that belong to rows' final
 * states, and the reservations their settles held, given back.
 * `billing`: "mark" finds the rows to bill and marks them here; "marked"
 * means the transition already marked them (transitionRows' markBilled),
 * and exactly those are charged, which saves a second write of each row.
 */
export async function afterTransitions(
  metering: SettlementMetering | undefined,
  trx: Transaction<Database>,
  rows: readonly SettlementOutcomeRow[],
  reservations: readonly QuotaReservation[] = [],
  billing: "mark" | "marked" = "mark",
): Promise<void> {
  const final = rows.filter((r) => r.status !== "pending" && r.status !== "not_attempted");
  if (final.length > 0) await recordSettlementEvents(trx, final);
  if (!metering) return;
  // A success that sent nothing (an `upto` settled at zero) moved no money
  // and is not billed.
  const billable =
    billing === "marked"
      ? final.filter((r) => r.billed)
      : final.filter((r) => r.status === "succeeded" && r.transaction && !r.billed);
  if (billable.length === 0 && reservations.length === 0) return;
  await metering.chargeAndReleaseIn(
    trx,
    billable.map((r) => ({ accountId: r.account_id, units: r.units, settlementId: r.id })),
    reservations,
  );
  if (billable.length === 0 || billing === "marked") return;
  await trx
    .updateTable("settlements")
    .set({ billed: true })
    .where(
      "id",
      "in",
      billable.map((r) => r.id),
    )
    .execute();
}
