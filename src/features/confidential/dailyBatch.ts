/**
 * The daily batch (spec 3.3, 8): at 00:00 UTC every confidential payment that
 * settled before that midnight becomes available, with one encrypted write
 * per enabled merchant (zero for a merchant who earned nothing, so neither
 * who earned nor how often shows on-chain).
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
import type { Hex } from "viem";
import type { Logger } from "../../lib/logger.js";
import type { Database } from "../../storage/schema.js";
import { dayStart, dayToDate } from "./credits.js";
import type { ConfidentialVault } from "./vaultPort.js";

interface PlannedSlot {
  slot: string;
  amount: string;
  receiptNonces: Hex[];
  authorizationKeys: string[];
}

/** Another replica took over the day's lease while this one was planning. */
export class LeaseLost extends Error {
  constructor(day: number) {
    super(`the confidential batch of ${dayToDate(day)} is now run by another replica`);
  }
}

export type BatchOutcome =
  | { ran: true; day: number; slots: number; credits: number; txHashes: Hex[] }
  | { ran: false; day: number; why: "done" | "held" };

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
   * Runs (or resumes) the batch that credits everything settled before
   * 00:00 UTC of `day`. `now` is the caller's clock, so tests can move it.
   */
  async run(day: number, now: Date): Promise<BatchOutcome> {
    const claimed = await this.claim(day, now);
    if (!claimed) return { ran: false, day, why: (await this.isDone(day)) ? "done" : "held" };
    const plan = claimed.plan ?? (await this.makePlan(day));
    const log = this.opts.log.child({ day: dayToDate(day) });
    log.info({ slots: plan.length }, "confidential daily batch: crediting");
    const { txHashes, alreadyCredited } = await this.vault.creditDay({
      day,
      credits: plan.map((p) => ({
        slot: BigInt(p.slot),
        amount: BigInt(p.amount),
        receiptNonces: p.receiptNonces,
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

  /** Every enabled slot with what it earned before the day's midnight; stored with the claim. */
  private async makePlan(day: number): Promise<PlannedSlot[]> {
    const midnight = dayStart(day);
    const [slots, credits] = await Promise.all([
      this.db
        .selectFrom("confidential_merchants")
        .select(["account_id", "slot"])
        .where("slot", "is not", null)
        .where("enabled_at", "<", midnight)
        .orderBy("slot")
        .execute(),
      this.db
        .selectFrom("confidential_credits as c")
        .innerJoin("settlements as s", "s.authorization_key", "c.authorization_key")
        .select(["c.account_id", "c.amount", "c.payment_nonce", "c.authorization_key"])
        .where("s.status", "=", "succeeded")
        .where("s.finished_at", "<", midnight)
        .where("c.credited_day", "is", null)
        .execute(),
    ]);
    const bySlotAccount = new Map<string, PlannedSlot>();
    for (const s of slots) {
      bySlotAccount.set(s.account_id, {
        slot: s.slot!,
        amount: "0",
        receiptNonces: [],
        authorizationKeys: [],
      });
    }
    for (const c of credits) {
      const p = bySlotAccount.get(c.account_id);
      // A merchant enabled after midnight cannot have a credit before it.
      if (!p) continue;
      p.amount = (BigInt(p.amount) + BigInt(c.amount)).toString();
      p.receiptNonces.push(c.payment_nonce as Hex);
      p.authorizationKeys.push(c.authorization_key);
    }
    const plan = [...bySlotAccount.values()];
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
