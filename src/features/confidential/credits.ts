/**
 * The credit each confidential payment owes its merchant, and its receipt.
 *
 * A credit row is written only from a settlement recorded `succeeded`, never
 * from a request: the mechanism has then verified the payer's signature and
 * the transfer landed. Its owner is the account of that settlement, its
 * amount the signed authorization's value, its merchant the one the
 * settlement's own requirements named (checked against the owner's
 * withdrawal address). A refused or failed attempt therefore leaves nothing,
 * and a request cannot choose any of the three. The settle answer writes the
 * row; a payment the reconciler finished (its answer lost) is written by the
 * sweep (`sweep`), so every settled payment gets its row and its receipt.
 *
 * The receipt is our EIP-712 signature over the credit (spec 4.6 rule 8); it
 * is signed when the row is written and again on demand if that was lost,
 * and the signature is deterministic, so every copy is the same receipt.
 */
import { getAddress, isAddress, type Hex } from "viem";
import type { Kysely } from "kysely";
import type { Database } from "../../storage/schema.js";
import type { ConfidentialVault, SignedReceipt } from "./vaultPort.js";
import { utcDay } from "../../chains/confidentialPort.js";

export type CreditState = "settling" | "pending" | "available" | "failed";

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

  /**
   * Writes the credit of the payment settled under `authorizationKey`, from
   * its `succeeded` settlement row (owned by `accountId` when given).
   * Returns whether a credit row now exists for it. Idempotent: a second
   * call, or a race with the sweep, finds the row already written.
   */
  async recordSettled(authorizationKey: string, accountId?: string): Promise<boolean> {
    let q = this.db
      .selectFrom("settlements as s")
      .innerJoin("confidential_merchants as m", "m.account_id", "s.account_id")
      .select([
        "s.account_id",
        "s.network",
        "s.asset",
        "s.pay_to",
        "s.amount",
        "s.request",
        "s.finished_at",
        "m.merchant_address",
      ])
      .where("s.authorization_key", "=", authorizationKey)
      .where("s.status", "=", "succeeded");
    if (accountId !== undefined) q = q.where("s.account_id", "=", accountId);
    const row = await q.executeTakeFirst();
    if (!row) return false;
    const credit = creditOf(row, this.vault.address);
    if (!credit) return false;
    await this.db
      .insertInto("confidential_credits")
      .values({ authorization_key: authorizationKey, ...credit })
      // Another writer (the sweep, a retry) got there first: the same row.
      .onConflict((oc) => oc.column("authorization_key").doNothing())
      .execute();
    return true;
  }

  /**
   * Writes the credits of confidential payments that settled without one
   * (their settle answer was lost and the reconciler finished them, or the
   * write after the answer failed), for settlements started since `since`,
   * and signs their receipts. Returns how many it wrote.
   */
  async sweep(since: Date): Promise<number> {
    const missing = await this.db
      .selectFrom("settlements as s")
      .innerJoin("confidential_merchants as m", "m.account_id", "s.account_id")
      .leftJoin("confidential_credits as c", "c.authorization_key", "s.authorization_key")
      .select(["s.authorization_key", "s.account_id"])
      .where("s.started_at", ">=", since)
      .where("s.status", "=", "succeeded")
      .where("s.pay_to", "=", this.vault.address.toLowerCase())
      .where("c.authorization_key", "is", null)
      .limit(500)
      .execute();
    let written = 0;
    for (const m of missing) {
      if (!m.authorization_key) continue;
      if (!(await this.recordSettled(m.authorization_key, m.account_id))) continue;
      written++;
      await this.receiptFor(m.authorization_key, m.account_id);
    }
    return written;
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

/**
 * The credit a succeeded settlement row owes, or undefined when it is not a
 * confidential payment to this vault for the owner's own merchant (the gate
 * refused those before anything was sent; checked again, since this is
 * where money becomes a merchant's). The amount is the signed
 * authorization's value, which the mechanism checked equals the
 * requirements' amount before sending, so both must agree.
 */
function creditOf(
  row: {
    account_id: string;
    network: string;
    asset: string;
    pay_to: string;
    amount: string;
    request: unknown;
    merchant_address: string;
  },
  vault: string,
) {
  const request = row.request as {
    paymentPayload?: { payload?: { authorization?: Record<string, unknown> } };
    paymentRequirements?: { extra?: Record<string, unknown> };
  } | null;
  const auth = request?.paymentPayload?.payload?.authorization;
  const extra = request?.paymentRequirements?.extra;
  const from = auth?.["from"];
  const nonce = auth?.["nonce"];
  const value = auth?.["value"];
  const merchant = extra?.["merchant"];
  if (
    extra?.["confidential"] !== true ||
    row.pay_to.toLowerCase() !== vault.toLowerCase() ||
    typeof merchant !== "string" ||
    merchant.toLowerCase() !== row.merchant_address.toLowerCase() ||
    typeof from !== "string" ||
    !isAddress(from, { strict: false }) ||
    typeof nonce !== "string" ||
    !/^0x[0-9a-fA-F]{64}$/.test(nonce) ||
    typeof value !== "string" ||
    !/^[0-9]{1,30}$/.test(value) ||
    BigInt(value) !== BigInt(row.amount)
  ) {
    return undefined;
  }
  return {
    account_id: row.account_id,
    merchant_address: row.merchant_address.toLowerCase(),
    network: row.network,
    asset: row.asset.toLowerCase(),
    payer: from.toLowerCase(),
    amount: BigInt(value).toString(),
    payment_nonce: nonce.toLowerCase(),
  };
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
