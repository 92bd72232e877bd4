/**
 * The daily batch (spec 3.3, 8): at 00:00 UTC every confidential payment that
 * settled during the day that just ended becomes available, with one
 * encrypted write per enabled merchant (the chain side writes an encrypted
 * zero for a merchant who earned nothing, so neither who earned nor how often
 * shows on-chain). The contract takes a day's batch during the day after it;
 * a payment whose batch never ran is redeemed by the merchant's wallet from
 * its receipt.
 *
 * Exactly once, across replicas and crashes, by three layers:
 * - one `confidential_batches` row per day, claimed under a lease: one
 *   replica runs it; a replica that dies leaves a lease that runs out, and
 *   whoever claims it next resumes;
 * - the plan (which credits, which slots) is stored before the first
 *   transaction, so a resumed batch sends the same credits and marks the same
 *   payments, whatever settled since;
 * - the contract refuses a second credit of a slot for a day, so a chunk sent
 *   twice credits once.
 */
import { sql, type Kysely } from "kysely";
import { getAddress, type Address, type Hex } from "viem";
import type { Logger } from "../../lib/logger.js";
import type { Database } from "../../storage/schema.js";
import { dayStart, dayToDate } from "./credits.js";
import type { ConfidentialVault } from "./vaultPort.js";

/**
 * The contract takes a day's batch until the end of the next day; in that
 * window's last hour the batch runs even with payments still settling.
 */
const LAST_HOUR_MS = 3_600_000;

interface PlannedSlot {
  slot: string;
  amount: string;
  receipts: { payer: Address; nonce: Hex; amount: string }[];
  authorizationKeys: string[];
}

/** Another replica took over the day's lease while this one was planning. */
class LeaseLost extends Error {
  constructor(day: number) {
    super(`the confidential batch of ${dayToDate(day)} is now run by another replica`);
  }
}

export type BatchOutcome =
  | { ran: true; day: number; slots: number; credits: number; txHashes: Hex[] }
  | { ran: false; day: number; why: "done" | "held" | "settling" };

export interface DailyBatchOptions {
  /** Who is running it, for the lease (a replica id). */
  owner: string;
  /** How long a claim holds before another replica may resume it. */
  leaseMs: number;
  log: Logger;
}

export class DailyBatch {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly vault: ConfidentialVault,
    private readonly opts: DailyBatchOptions,
  ) {}

  /** Whether the batch of `day` has finished. */
  async isDone(day: number): Promise<boolean> {
    const row = await this.db
      .selectFrom("confidential_batches")
      .select("status")
      .where("day", "=", day)
      .executeTakeFirst();
    return row?.status === "done";
  }

  /**
   * Runs (or resumes) the batch of `day` (a UTC day number that has ended):
   * the payments that settled during it. `now` is the caller's clock, so
   * tests can move it.
   */
  async run(day: number, now: Date): Promise<BatchOutcome> {
    const claimed = await this.claim(day, now);
    if (!claimed) return { ran: false, day, why: (await this.isDone(day)) ? "done" : "held" };
    // A payment of the day whose outcome is not recorded yet (its settle
    // still running, or left to the reconciler) would miss the plan for
    // good: the plan waits for it, but not past the window's last hour, so
    // a payment stuck pending cannot hold everyone else's credit back.
    if (
      !claimed.plan &&
      now.getTime() < dayStart(day + 2).getTime() - LAST_HOUR_MS &&
      (await this.stillSettling(day))
    ) {
      return { ran: false, day, why: "settling" };
    }
    const plan = claimed.plan ?? (await this.makePlan(day));
    const log = this.opts.log.child({ day: dayToDate(day) });
    log.info({ slots: plan.length }, "confidential daily batch: crediting");
    const { txHashes, alreadyCredited } = await this.vault.creditDay({
      day,
      credits: plan.map((p) => ({
        slot: BigInt(p.slot),
        amount: BigInt(p.amount),
        receipts: p.receipts.map((r) => ({ ...r, amount: BigInt(r.amount) })),
      })),
    });
    const keys = plan.flatMap((p) => p.authorizationKeys);
    const total = plan.reduce((t, p) => t + BigInt(p.amount), 0n);
    const allHashes = [...(claimed.txHashes ?? []), ...txHashes];
    await this.db.transaction().execute(async (tx) => {
      if (keys.length > 0) {
        await tx
          .updateTable("confidential_credits")
          .set({
            credited_day: day,
            batch_tx_hash: txHashes.at(-1) ?? claimed.txHashes?.at(-1) ?? null,
          })
          .where("authorization_key", "in", keys)
          .where("credited_day", "is", null)
          .execute();
      }
      await tx
        .updateTable("confidential_batches")
        .set({
          status: "done",
          finished_at: now,
          slots: plan.length,
          credits: keys.length,
          total_amount: total.toString(),
          tx_hashes: JSON.stringify(allHashes),
        })
        .where("day", "=", day)
        .where("owner", "=", this.opts.owner)
        .execute();
    });
    log.info(
      { slots: plan.length, credits: keys.length, resumedSlots: alreadyCredited.length },
      "confidential daily batch: done",
    );
    return { ran: true, day, slots: plan.length, credits: keys.length, txHashes };
  }

  private async claim(
    day: number,
    now: Date,
  ): Promise<{ plan: PlannedSlot[] | null; txHashes: Hex[] | null } | undefined> {
    const leaseUntil = new Date(now.getTime() + this.opts.leaseMs);
    const row = await this.db
      .insertInto("confidential_batches")
      .values({ day, status: "running", owner: this.opts.owner, lease_until: leaseUntil })
      .onConflict((oc) =>
        oc
          .column("day")
          .doUpdateSet({ owner: this.opts.owner, lease_until: leaseUntil })
          .where("confidential_batches.status", "=", "running")
          .where(({ eb, or }) =>
            or([
              eb("confidential_batches.lease_until", "<", now),
              eb("confidential_batches.owner", "=", this.opts.owner),
            ]),
          ),
      )
      .returning(["plan", "tx_hashes"])
      .executeTakeFirst();
    if (!row) return undefined;
    return {
      plan: (row.plan as PlannedSlot[] | null) ?? null,
      txHashes: (row.tx_hashes as Hex[] | null) ?? null,
    };
  }

  /**
   * Whether a confidential payment that may belong to `day` is still
   * pending: its receipt was stamped during the day, or (not stamped yet) its
   * settle started then or during the day before (a settle that finishes
   * after midnight belongs to the day it finishes in).
   */
  private async stillSettling(day: number): Promise<boolean> {
    const at = sql<Date>`coalesce(c.settled_at, s.started_at)`;
    const row = await this.db
      .selectFrom("confidential_credits as c")
      .innerJoin("settlements as s", "s.authorization_key", "c.authorization_key")
      .select("c.authorization_key")
      .where("s.status", "=", "pending")
      .where("c.credited_day", "is", null)
      .where(at, ">=", dayStart(day - 1))
      .where(at, "<", dayStart(day + 1))
      .limit(1)
      .executeTakeFirst();
    return row !== undefined;
  }

  /** Each slot that earned during the day, with its receipts; stored with the claim. */
  private async makePlan(day: number): Promise<PlannedSlot[]> {
    const credits = await this.db
      .selectFrom("confidential_credits as c")
      .innerJoin("settlements as s", "s.authorization_key", "c.authorization_key")
      .innerJoin("confidential_merchants as m", "m.account_id", "c.account_id")
      .select(["m.slot", "c.payer", "c.amount", "c.payment_nonce", "c.authorization_key"])
      .where("s.status", "=", "succeeded")
      .where("c.credited_day", "is", null)
      // The same instant the receipt's day is taken from (credits.ts).
      .where(sql<Date>`coalesce(c.settled_at, s.finished_at)`, ">=", dayStart(day))
      .where(sql<Date>`coalesce(c.settled_at, s.finished_at)`, "<", dayStart(day + 1))
      .orderBy("c.authorization_key")
      .execute();
    const bySlot = new Map<string, PlannedSlot>();
    for (const c of credits) {
      if (c.slot === null) continue;
      const p = bySlot.get(c.slot) ?? {
        slot: c.slot,
        amount: "0",
        receipts: [],
        authorizationKeys: [],
      };
      bySlot.set(c.slot, p);
      p.amount = (BigInt(p.amount) + BigInt(c.amount)).toString();
      p.receipts.push({
        payer: getAddress(c.payer),
        nonce: c.payment_nonce as Hex,
        amount: c.amount,
      });
      p.authorizationKeys.push(c.authorization_key);
    }
    const plan = [...bySlot.values()];
    await this.db
      .updateTable("confidential_batches")
      .set({ plan: JSON.stringify(plan) })
      .where("day", "=", day)
      .where("owner", "=", this.opts.owner)
      .where(sql<boolean>`plan is null`)
      .execute();
    // Whatever plan is stored is the day's plan, even if a replica that
    // resumed a lapsed lease stored it first.
    const stored = await this.db
      .selectFrom("confidential_batches")
      .select(["plan", "owner"])
      .where("day", "=", day)
      .executeTakeFirstOrThrow();
    if (stored.owner !== this.opts.owner) throw new LeaseLost(day);
    return stored.plan as PlannedSlot[];
  }
}
