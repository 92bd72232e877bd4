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
 * The receipt is the opening of the commitment the vault stored for the
 * payment when it collected it (its slot and blinding, the blinding derived
 * from the slot's salt and the payment's key): nobody signs it, and it is
 * good exactly when it opens that commitment. It is read when the row is
 * written and again on demand if that was lost; it is deterministic, so
 * every copy is the same receipt. (The `receipt_signature` column of rows
 * from before is left null.)
 */
import { getAddress, isAddress, type Hex } from "../../chains/confidentialPort.js";
import type { Kysely } from "kysely";
import type { Database } from "../../storage/schema.js";
import type { ConfidentialReceipt, ConfidentialVault } from "./vaultPort.js";
import { utcDay, type DayPhase } from "../../chains/confidentialPort.js";
import { describeError } from "../../lib/errors.js";
import type { Logger } from "../../lib/logger.js";

/**
 * - `pending`: settled, waiting for its day's batch (not spendable);
 * - `available`: its day's batch released it into the balance;
 * - `redeemed`: credited by its receipt, on-chain;
 * - `returned`: no merchant could be credited, so the vault sent it back to its payer;
 * - `bond_paid`: (rows of the vault before commitments) paid from the operator bond;
 * - `unbacked`: the vault has no record of the payment for its day (reported);
 * - `settling` / `failed`: its settlement is not (or no longer) a success.
 */
type CreditState =
  | "settling"
  | "pending"
  | "available"
  | "redeemed"
  | "returned"
  | "bond_paid"
  | "unbacked"
  | "failed";

export interface CreditListing {
  paymentNonce: string;
  payer: string;
  amount: string;
  merchant: string;
  transaction: string | null;
  state: CreditState;
  createdAt: string;
  /** The UTC day the vault collected it in (YYYY-MM-DD). */
  day: string | null;
  creditedDay: string | null;
  /**
   * From when its receipt may be redeemed on-chain: a day after its day
   * ended while the day is open, or the day's end while it is disputed
   * (redeemable now); null while the day is closing or closed (the vault
   * refuses), once it is credited, and when the day's phase cannot be read.
   */
  redeemableFrom: string | null;
  problem: string | null;
  receipt: ConfidentialReceipt | null;
}

/** Settlements (and unsigned receipts) a sweep handles at most; the next sweep takes the rest. */
const SWEEP_BATCH = 500;

/**
 * One day of the merchant's receipts checked against its slot's credit (see
 * `dayChecks`). No transaction: the merchant's tools build the challenge
 * themselves from `unpresented` (each checked against the chain first).
 */
export interface DayCheck {
  day: string;
  phase: string;
  /** Until when it may be challenged (null once disputed or never closed). */
  windowEndsAt: string | null;
  /** The slot's credit of the day, atomic units, as the service decrypts it; null on a disputed day. */
  credit: string | null;
  /** Receipts of the day still in its pool, and what they add up to. */
  receipts: number;
  receiptsTotal: string;
  shortfall: boolean;
  /** What the bond paid into the slot's balance for the day's shortfalls. */
  paidFromBond: string;
  /** The challenge bounty the bond paid into the slot's balance besides them. */
  bountyFromBond: string;
  /** On a shortfall, the receipts of the day not presented in its current attempt. */
  unpresented: ConfidentialReceipt[];
}

export class ConfidentialCredits {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly vault: ConfidentialVault,
    private readonly log: Logger,
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
      .values({
        authorization_key: authorizationKey,
        ...credit,
        payment_key: this.vault.paymentKey(getAddress(credit.payer), credit.payment_nonce as Hex),
      })
      // Another writer (the sweep, a retry) got there first: the same row.
      .onConflict((oc) => oc.column("authorization_key").doNothing())
      .execute();
    return true;
  }

  /** Slot and salt by account, once assigned (neither can change: a trigger refuses it). */
  private readonly slots = new Map<string, { slot: bigint; salt: Hex }>();

  /**
   * Binds a payment about to be collected to the account's slot: the
   * commitment `collect` will store, signed by the operator key (the
   * family's collecting signer adds it to the transaction). Throws when the
   * account has no slot yet; the caller sends nothing then.
   */
  async attribute(accountId: string, payer: Hex, nonce: Hex): Promise<void> {
    let known = this.slots.get(accountId);
    if (!known) {
      const row = await this.db
        .selectFrom("confidential_merchants")
        .select(["slot", "slot_secret"])
        .where("account_id", "=", accountId)
        .executeTakeFirst();
      if (!row || row.slot === null || !row.slot_secret) {
        throw new Error("this account's confidential slot is not assigned yet");
      }
      known = { slot: BigInt(row.slot), salt: row.slot_secret as Hex };
      if (this.slots.size >= 10_000) this.slots.clear();
      this.slots.set(accountId, known);
    }
    await this.vault.attribute({ payer: getAddress(payer), nonce, ...known });
  }

  /**
   * Writes the credits of confidential payments that settled without one
   * (their settle answer was lost and the reconciler finished them, or the
   * write after the answer failed), for settlements started since `since`,
   * and signs every receipt still unsigned. Returns how many credits it
   * wrote; a receipt it cannot sign yet (the vault unreachable) is logged
   * and tried again on the next sweep.
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
      .limit(SWEEP_BATCH)
      .execute();
    let written = 0;
    for (const m of missing) {
      if (m.authorization_key && (await this.recordSettled(m.authorization_key, m.account_id))) {
        written++;
      }
    }
    const unsigned = await this.db
      .selectFrom("confidential_credits")
      .select(["authorization_key", "account_id"])
      .where("receipt", "is", null)
      .where("outcome", "is", null)
      .where("problem", "is", null)
      .where("created_at", ">=", since)
      .limit(SWEEP_BATCH)
      .execute();
    for (const u of unsigned) {
      try {
        await this.receiptFor(u.authorization_key, u.account_id);
      } catch (e) {
        this.log.warn(
          { err: describeError(e), authorizationKey: u.authorization_key },
          "could not sign a confidential receipt yet",
        );
      }
    }
    return written;
  }

  /**
   * The receipt of a settled credit owned by `accountId`, signed now if it
   * was not yet. Undefined when there is no such credit or its slot is
   * unknown. The receipt carries the vault's own record of the payment (its
   * amount and the UTC day it was collected in, whose pool it belongs to):
   * only such a receipt can be redeemed. Throws when the vault has no such
   * payment (the row is then reported by its day's batch, never receipted).
   */
  async receiptFor(
    authorizationKey: string,
    accountId: string,
  ): Promise<ConfidentialReceipt | undefined> {
    const row = await this.db
      .selectFrom("confidential_credits as c")
      .innerJoin("confidential_merchants as m", "m.account_id", "c.account_id")
      .select(["c.receipt", "c.payer", "c.amount", "c.payment_nonce", "m.slot", "m.slot_secret"])
      .where("c.authorization_key", "=", authorizationKey)
      .where("c.account_id", "=", accountId)
      .executeTakeFirst();
    if (!row || row.slot === null || !row.slot_secret) return undefined;
    const kept = receiptOfRow(row.receipt);
    if (kept) return kept;
    const receipt = await this.vault.receiptOf({
      payer: getAddress(row.payer),
      nonce: row.payment_nonce as Hex,
      slot: BigInt(row.slot),
      salt: row.slot_secret as Hex,
    });
    if (BigInt(receipt.amount) !== BigInt(row.amount)) {
      throw new Error(
        `the vault collected ${receipt.amount} for payment ${receipt.key}, not the ${row.amount} recorded`,
      );
    }
    await this.db
      .updateTable("confidential_credits")
      .set({
        receipt: JSON.stringify(receipt),
        payment_key: receipt.key,
        day: receipt.day,
        settled_at: new Date(),
      })
      .where("authorization_key", "=", authorizationKey)
      .execute();
    return receipt;
  }

  /**
   * The account's confidential payments, newest first (`before`: older
   * than that instant, for the next page), with their state.
   */
  async list(
    accountId: string,
    opts: { limit?: number; before?: Date } = {},
  ): Promise<CreditListing[]> {
    let q = this.db
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
        "c.day",
        "c.outcome",
        "c.problem",
        "c.receipt",
        "s.status",
        "s.transaction",
      ])
      .where("c.account_id", "=", accountId);
    if (opts.before) q = q.where("c.created_at", "<", opts.before);
    const rows = await q
      .orderBy("c.created_at", "desc")
      .limit(Math.max(1, Math.min(opts.limit ?? 100, 500)))
      .execute();
    const uncredited = (r: (typeof rows)[number]) =>
      r.day !== null && r.credited_day === null && r.outcome === null;
    // `redeem` takes a payment of an open day (from a day after it ended)
    // or of a disputed one, never of a day closing or closed.
    const phases = new Map<number, DayPhase>();
    await Promise.all(
      [...new Set(rows.filter(uncredited).map((r) => r.day!))].map((day) =>
        this.vault.dayInfo(day).then(
          (info) => void phases.set(day, info.phase),
          () => undefined, // unread: no redemption offered
        ),
      ),
    );
    const redeemableFrom = (r: (typeof rows)[number]): string | null => {
      if (!uncredited(r)) return null;
      const phase = phases.get(r.day!);
      if (phase === "open") return new Date((r.day! + 2) * DAY_MS).toISOString();
      if (phase === "disputed") return new Date((r.day! + 1) * DAY_MS).toISOString();
      return null;
    };
    return rows.map((r) => ({
      paymentNonce: r.payment_nonce,
      payer: getAddress(r.payer),
      amount: r.amount,
      merchant: getAddress(r.merchant_address),
      transaction: r.transaction ?? null,
      state: stateOf(r),
      createdAt: r.created_at.toISOString(),
      day: r.day === null ? null : dayToDate(r.day),
      creditedDay: r.credited_day === null ? null : dayToDate(r.credited_day),
      redeemableFrom: redeemableFrom(r),
      problem: r.problem,
      receipt: receiptOfRow(r.receipt) ?? null,
    }));
  }

  /**
   * Each recent day of the account's receipts that may still be challenged
   * (closed and in its window, or disputed), with the slot's credit of that
   * day as the vault holds it (decrypted with the operator's permission)
   * against what the day's receipts add up to; on a shortfall, the receipts
   * not yet presented in the day's current attempt. No calldata: the
   * merchant's wallet or script builds the challenge from the receipts
   * itself, after checking each against the chain.
   */
  async dayChecks(accountId: string, lookbackDays = 7): Promise<DayCheck[]> {
    const merchant = await this.db
      .selectFrom("confidential_merchants")
      .select(["slot"])
      .where("account_id", "=", accountId)
      .executeTakeFirst();
    if (!merchant || merchant.slot === null) return [];
    const slot = BigInt(merchant.slot);
    const now = await this.vault.chainTime();
    const today = utcDay(new Date(Number(now) * 1000));
    const rows = await this.db
      .selectFrom("confidential_credits")
      .select(["day", "receipt"])
      .where("account_id", "=", accountId)
      .where("day", ">=", today - lookbackDays)
      .where("day", "<", today)
      .where("receipt", "is not", null)
      .execute();
    const byDay = new Map<number, ConfidentialReceipt[]>();
    for (const r of rows) {
      const receipt = receiptOfRow(r.receipt);
      if (r.day === null || !receipt) continue;
      byDay.set(r.day, [...(byDay.get(r.day) ?? []), receipt]);
    }
    const checks: DayCheck[] = [];
    for (const [day, receipts] of [...byDay].sort(([a], [b]) => a - b)) {
      const info = await this.vault.dayInfo(day);
      const inWindow = info.phase === "closed" && now < info.challengeWindowEndsAt;
      if (!inWindow && info.phase !== "disputed") continue;
      const states = await Promise.all(receipts.map((r) => this.vault.payment(r.key)));
      const counted = receipts.filter((_, i) => states[i]!.state === "collected");
      const receiptsTotal = counted.reduce((t, r) => t + BigInt(r.amount), 0n);
      const credit =
        info.phase === "closed" ? ((await this.vault.dayCredit(slot, day)) ?? 0n) : null;
      const shortfall = info.phase === "disputed" || (credit !== null && credit < receiptsTotal);
      const presented = shortfall
        ? await Promise.all(counted.map((r) => this.vault.presented(r.key)))
        : [];
      checks.push({
        day: dayToDate(day),
        phase: info.phase,
        windowEndsAt:
          info.challengeWindowEndsAt === 0n
            ? null
            : new Date(Number(info.challengeWindowEndsAt) * 1000).toISOString(),
        credit: credit === null ? null : credit.toString(),
        receipts: counted.length,
        receiptsTotal: receiptsTotal.toString(),
        shortfall,
        paidFromBond: (await this.vault.penaltiesPaid(slot, day)).toString(),
        bountyFromBond: (await this.vault.bountiesPaid(slot, day)).toString(),
        unpresented: shortfall ? counted.filter((_, i) => !presented[i]) : [],
      });
    }
    return checks;
  }

  /**
   * What the account was paid that is not spendable yet: settled
   * confidential payments whose day's batch has not released them.
   */
  async pendingTotal(accountId: string): Promise<bigint> {
    const row = await this.db
      .selectFrom("confidential_credits")
      .select((eb) => eb.fn.sum<string | null>("amount").as("total"))
      .where("account_id", "=", accountId)
      .where("credited_day", "is", null)
      .where("outcome", "is", null)
      .where("problem", "is", null)
      .executeTakeFirst();
    return BigInt(row?.total ?? "0");
  }
}

function stateOf(r: {
  credited_day: number | null;
  outcome: "redeemed" | "returned" | "bond_paid" | null;
  problem: string | null;
  status: string | null;
}): CreditState {
  if (r.credited_day !== null) return "available";
  if (r.outcome === "redeemed") return "redeemed";
  if (r.outcome === "returned") return "returned";
  // Rows of the vault before commitments: paid from the operator bond.
  if (r.outcome === "bond_paid") return "bond_paid";
  if (r.problem !== null) return "unbacked";
  // Rows are written only for settled payments; a row whose settlement is
  // no longer live was reconciled as failed after its answer.
  return r.status === "succeeded" ? "pending" : r.status === "pending" ? "settling" : "failed";
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

/** The payer and nonce a settlement's stored request authorized, if it is an EIP-3009 payment. */
export function authorizationOf(request: unknown): { from: Hex; nonce: Hex } | undefined {
  const auth = (request as { paymentPayload?: { payload?: { authorization?: unknown } } } | null)
    ?.paymentPayload?.payload?.authorization as Record<string, unknown> | undefined;
  const from = auth?.["from"];
  const nonce = auth?.["nonce"];
  if (typeof from !== "string" || !isAddress(from, { strict: false })) return undefined;
  if (typeof nonce !== "string" || !/^0x[0-9a-fA-F]{64}$/.test(nonce)) return undefined;
  return { from: getAddress(from), nonce: nonce.toLowerCase() as Hex };
}

/**
 * A stored receipt, if it is one of this vault's openings (rows from before
 * commitments hold a signed receipt, which no longer proves anything).
 */
function receiptOfRow(stored: unknown): ConfidentialReceipt | undefined {
  const r = stored as Partial<ConfidentialReceipt> | null;
  return r && typeof r.blinding === "string" && typeof r.commitment === "string"
    ? (r as ConfidentialReceipt)
    : undefined;
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
