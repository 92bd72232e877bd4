/**
 * The credit each confidential payment owes its merchant, and its receipt.
 *
 * The credit row is written before the transfer is broadcast (keyed by the
 * payment's authorization), so whatever happens after, the daily batch finds
 * it once the settlements row says the money arrived. The receipt is our
 * EIP-712 signature over the credit (spec 4.6 rule 8); it is signed when the
 * settle succeeds and again on demand if that answer was lost, and the
 * signature is deterministic, so every copy is the same receipt.
 */
import { getAddress, type Address, type Hex } from "viem";
import type { Kysely } from "kysely";
import type { Database } from "../../storage/schema.js";
import type { ConfidentialVault, SignedReceipt } from "./vaultPort.js";
import { utcDay } from "../../chains/confidentialPort.js";

export interface CreditIntent {
  authorizationKey: string;
  accountId: string;
  merchant: Address;
  network: string;
  asset: string;
  payer: Address;
  amount: bigint;
  paymentNonce: Hex;
}

type CreditState = "settling" | "pending" | "available" | "failed";

export interface CreditListing {
  paymentNonce: string;
  payer: string;
  amount: string;
  merchant: string;
  transaction: string | null;
  state: CreditState;
  createdAt: string;
  creditedDay: string | null;
  receipt: SignedReceipt | null;
}

export class ConfidentialCredits {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly vault: ConfidentialVault,
  ) {}

  async recordIntent(c: CreditIntent): Promise<void> {
    await this.db
      .insertInto("confidential_credits")
      .values({
        authorization_key: c.authorizationKey,
        account_id: c.accountId,
        merchant_address: c.merchant.toLowerCase(),
        network: c.network,
        asset: c.asset.toLowerCase(),
        payer: c.payer.toLowerCase(),
        amount: c.amount.toString(),
        payment_nonce: c.paymentNonce.toLowerCase(),
      })
      // A retry of the same authorization meets the row it wrote before.
      .onConflict((oc) => oc.column("authorization_key").doNothing())
      .execute();
  }

  /**
   * The receipt of a settled credit owned by `accountId`, signed now if it
   * was not yet. Undefined when there is no such credit or its slot is
   * unknown. The receipt's day is the day the payment settled: the batch of
   * that day credits it, so the day is fixed once, with `settled_at`.
   */
  async receiptFor(
    authorizationKey: string,
    accountId: string,
  ): Promise<SignedReceipt | undefined> {
    const row = await this.db
      .selectFrom("confidential_credits as c")
      .innerJoin("confidential_merchants as m", "m.account_id", "c.account_id")
      .leftJoin("settlements as s", (j) =>
        j.onRef("s.authorization_key", "=", "c.authorization_key").on("s.status", "=", "succeeded"),
      )
      .select([
        "c.receipt",
        "c.receipt_signature",
        "c.payer",
        "c.merchant_address",
        "c.amount",
        "c.payment_nonce",
        "c.settled_at",
        "s.finished_at",
        "m.slot",
      ])
      .where("c.authorization_key", "=", authorizationKey)
      .where("c.account_id", "=", accountId)
      .executeTakeFirst();
    if (!row || row.slot === null) return undefined;
    if (row.receipt && row.receipt_signature) return row.receipt as SignedReceipt;
    const settledAt = row.settled_at ?? row.finished_at ?? new Date();
    const signed = await this.vault.signReceipt({
      paymentNonce: row.payment_nonce as Hex,
      payer: getAddress(row.payer),
      merchant: getAddress(row.merchant_address),
      slot: BigInt(row.slot),
      amount: BigInt(row.amount),
      day: utcDay(settledAt),
    });
    await this.db
      .updateTable("confidential_credits")
      .set({
        receipt: JSON.stringify(signed),
        receipt_signature: signed.signature,
        settled_at: settledAt,
      })
      .where("authorization_key", "=", authorizationKey)
      .where("receipt_signature", "is", null)
      .execute();
    return signed;
  }

  /** The account's confidential payments, newest first, with their state. */
  async list(accountId: string, limit = 100): Promise<CreditListing[]> {
    const rows = await this.db
      .selectFrom("confidential_credits as c")
      .leftJoin("settlements as s", (j) =>
        j
          .onRef("s.authorization_key", "=", "c.authorization_key")
          .on("s.status", "in", ["pending", "succeeded"]),
      )
      .select([
        "c.payment_nonce",
        "c.payer",
        "c.amount",
        "c.merchant_address",
        "c.created_at",
        "c.credited_day",
        "c.receipt",
        "c.receipt_signature",
        "s.status",
        "s.transaction",
      ])
      .where("c.account_id", "=", accountId)
      .orderBy("c.created_at", "desc")
      .limit(Math.max(1, Math.min(limit, 500)))
      .execute();
    return rows.map((r) => ({
      paymentNonce: r.payment_nonce,
      payer: getAddress(r.payer),
      amount: r.amount,
      merchant: getAddress(r.merchant_address),
      transaction: r.transaction ?? null,
      state:
        r.credited_day !== null
          ? "available"
          : r.status === "succeeded"
            ? "pending"
            : r.status === "pending"
              ? "settling"
              : "failed",
      createdAt: r.created_at.toISOString(),
      creditedDay: r.credited_day === null ? null : dayToDate(r.credited_day),
      receipt: r.receipt && r.receipt_signature ? (r.receipt as SignedReceipt) : null,
    }));
  }
}

const DAY_MS = 86_400_000;

export { utcDay };

/** The YYYY-MM-DD of a UTC day number. */
export function dayToDate(day: number): string {
  return new Date(day * DAY_MS).toISOString().slice(0, 10);
}

export function dayStart(day: number): Date {
  return new Date(day * DAY_MS);
}
