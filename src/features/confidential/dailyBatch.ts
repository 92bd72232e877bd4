/**
 * The daily batch (spec 3.3, 8): after 00:00 UTC every confidential payment
 * the vault collected during the day that ended becomes available, with one
 * encrypted write per enabled merchant (the chain side writes an encrypted
 * zero for a merchant who earned nothing, so neither who earned nor how
 * often shows on-chain).
 *
 * The plan is made from the vault's own ledger of the day, not from our
 * records alone: each payment the vault collected is credited to the slot
 * it was committed to when collected (our credit row names that merchant;
 * a committed payment without a row goes to the merchant whose slot its
 * commitment opens to), and the slots' credits must add up to the day's
 * pool, which the vault has the KMS prove before anything becomes
 * spendable. So:
 * - a credit row the vault has no payment for (a bug, a reorg) is skipped
 *   and reported (its `problem`), never fatal to the day;
 * - an unattributed payment (collected by someone else, with no
 *   commitment) that no settlement of ours claims is returned to its payer;
 *   one whose settlement is still pending holds the batch until the
 *   reconciler decides it;
 * - a payment redeemed by its receipt, or returned, is recorded as such.
 *
 * A closed day's credits are released only after its challenge window (the
 * vault refuses earlier): the batch stays `running` and a later pass
 * releases them. Before that, once per attempt, the batch checks the closed
 * split against its own plan, slot by slot (it decrypts each credit), and
 * challenges any short slot with its merchant's receipts: a split the
 * operator key wrote against our plan is proven short without its merchant
 * having to act. A day a challenge proved short (`disputed`) waits for the
 * bond owner; nothing is sent for it meanwhile.
 *
 * A day can be closed any time after it ended, so a batch that did not run
 * (an outage, a rejected attempt) runs on a later pass: the worker looks for
 * every unclosed day, not just yesterday.
 *
 * Exactly once, across replicas and crashes:
 * - one `confidential_batches` row per day, claimed under a lease that the
 *   runner renews while it runs; a replica that dies leaves a lease that
 *   runs out, and whoever claims it next resumes;
 * - the plan is the same for every run of a day (the ledger of an ended day
 *   only loses payments to redemptions and returns, which the plan follows);
 * - the contract refuses a second credit of a slot per day and attempt, and
 *   a second release, so a chunk sent twice credits once.
 */
import type { Kysely } from "kysely";
import { getAddress, type Hex } from "../../chains/confidentialPort.js";
import { describeError } from "../../lib/errors.js";
import type { Logger } from "../../lib/logger.js";
import type { Database } from "../../storage/schema.js";
import {
  DayDisputedError,
  DayRejectedError,
  type CollectedPayment,
} from "../../chains/confidentialPort.js";
import { committedSlot, SplitWatcher } from "./splitWatcher.js";
import { authorizationOf, dayStart, dayToDate, type ConfidentialCredits } from "./credits.js";
import type { ConfidentialVault } from "./vaultPort.js";

/** Another replica took over the day's lease. */
class LeaseLost extends Error {
  constructor(day: number) {
    super(`the confidential batch of ${dayToDate(day)} is now run by another replica`);
  }
}

export type BatchOutcome =
  | {
      ran: true;
      day: number;
      slots: number;
      credits: number;
      returned: number;
      skipped: number;
      txHashes: Hex[];
    }
  | {
      ran: false;
      day: number;
      why:
        | "done"
        | "held"
        | "settling"
        | "rejected"
        | "challenge-window"
        | "disputed"
        | "unattributable";
    };

export interface DailyBatchOptions {
  /** Who is running it, for the lease (a replica id). */
  owner: string;
  /** How long a claim holds before another replica may resume it; renewed while running. */
  leaseMs: number;
  log: Logger;
}

/** A credit row the batch did not credit, and why. */
interface Skipped {
  authorizationKey: string;
  problem: string;
}

interface Plan {
  credits: { slot: bigint; amount: bigint }[];
  /** Payment keys the batch credits to slots, by our credit row. */
  credited: string[];
  returns: Hex[];
  redeemed: string[];
  returnedBefore: string[];
  skipped: Skipped[];
  settling: boolean;
  /** Committed payments whose slot no merchant of ours opens (never expected). */
  unattributable: Hex[];
}

export class DailyBatch {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly vault: ConfidentialVault,
    private readonly credits: ConfidentialCredits,
    private readonly opts: DailyBatchOptions,
  ) {
    this.watcher = new SplitWatcher(db, vault, credits, opts.log);
  }

  /** Checks each closed split against the plan, challenging a short slot. */
  private readonly watcher: SplitWatcher;

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
   * Days before `today` that may still need their batch: days of credits not
   * yet credited, days whose batch started and did not finish, and recent
   * days whose pool on the vault is not closed (payments collected without a
   * settlement of ours). Oldest first.
   */
  async openDays(today: number, lookbackDays = 7): Promise<number[]> {
    const [fromCredits, fromBatches] = await Promise.all([
      this.db
        .selectFrom("confidential_credits")
        .select("day")
        .distinct()
        .where("credited_day", "is", null)
        .where("outcome", "is", null)
        .where("problem", "is", null)
        .where("day", "<", today)
        .execute(),
      this.db
        .selectFrom("confidential_batches")
        .select("day")
        .where("status", "=", "running")
        .where("day", "<", today)
        .execute(),
    ]);
    const days = new Set<number>();
    for (const r of [...fromCredits, ...fromBatches]) if (r.day !== null) days.add(r.day);
    const recent = Array.from({ length: lookbackDays }, (_, i) => today - 1 - i).filter(
      (d) => d >= 0 && !days.has(d),
    );
    const infos = await Promise.all(recent.map((d) => this.vault.dayInfo(d)));
    for (const info of infos) {
      if (info.phase !== "closed" && info.pool > 0n && !(await this.isDone(info.day))) {
        days.add(info.day);
      }
    }
    return [...days].sort((a, b) => a - b);
  }

  /**
   * Runs (or resumes) the batch of `day` (a UTC day that has ended): the
   * payments the vault collected during it. `now` is the caller's clock, so
   * tests can move it.
   */
  async run(day: number, now: Date): Promise<BatchOutcome> {
    const claimed = await this.claim(day, now);
    if (!claimed) return { ran: false, day, why: (await this.isDone(day)) ? "done" : "held" };
    const log = this.opts.log.child({ day: dayToDate(day) });
    const lease = this.keepLease(day, now);
    try {
      const info = await this.vault.dayInfo(day);
      if (info.phase === "disputed") {
        log.error(
          "confidential daily batch: a challenge proved this day's split short (the bond paid the shortfall); no day closes until the bond owner resumes",
        );
        return { ran: false, day, why: "disputed" };
      }
      const plan = await this.plan(day, info.phase === "open");
      if (plan.settling) return { ran: false, day, why: "settling" };
      if (plan.unattributable.length > 0) {
        log.error(
          { payments: plan.unattributable },
          "confidential daily batch: payments committed to a slot no merchant of ours opens; the day waits",
        );
        return { ran: false, day, why: "unattributable" };
      }
      if (info.phase === "closed") {
        await this.watcher.watch(day, info.attempt, plan.credits, plan.credited);
      }
      if (info.phase === "open" && info.pool === 0n && plan.returns.length === 0) {
        // Every payment of the day was redeemed or returned (or there were
        // none): nothing to credit, so nothing is sent; the rows say so.
        await this.finish(day, now, plan, [], info.attempt);
        return {
          ran: true,
          day,
          slots: 0,
          credits: 0,
          returned: 0,
          skipped: plan.skipped.length,
          txHashes: [],
        };
      }
      for (const s of plan.skipped) {
        log.error(
          { authorizationKey: s.authorizationKey, problem: s.problem },
          "confidential daily batch: a credit has no payment in the vault's ledger; skipped",
        );
      }
      if (plan.returns.length > 0) {
        log.error(
          { payments: plan.returns },
          "confidential daily batch: payments no settlement claims are returned to their payers",
        );
      }
      await this.db
        .updateTable("confidential_batches")
        .set({
          plan: JSON.stringify(
            plan.credits.map((c) => ({ slot: c.slot.toString(), amount: c.amount.toString() })),
          ),
        })
        .where("day", "=", day)
        .where("owner", "=", this.opts.owner)
        .execute();
      log.info({ slots: plan.credits.length, payments: plan.credited.length }, "crediting");
      let result;
      try {
        result = await this.vault.creditDay({
          day,
          credits: plan.credits,
          returns: plan.returns,
          shouldStop: () => lease.lost,
        });
      } catch (e) {
        if (e instanceof DayDisputedError) {
          log.error(e.message);
          return { ran: false, day, why: "disputed" };
        }
        if (!(e instanceof DayRejectedError)) throw e;
        // The KMS proved the credits wrong (the pool changed under them: a
        // redemption meanwhile). The day reopened on-chain; the next pass
        // plans again from the ledger as it now is.
        log.error(
          { attempt: e.attempt },
          "confidential daily batch: the vault rejected the credits",
        );
        return { ran: false, day, why: "rejected" };
      }
      if (result.releasableAfter !== null) {
        // Closed; its merchants may challenge it until then.
        return { ran: false, day, why: "challenge-window" };
      }
      const finalInfo = await this.vault.dayInfo(day);
      await this.finish(day, now, plan, result.txHashes, finalInfo.attempt);
      log.info(
        {
          slots: plan.credits.length,
          credits: plan.credited.length,
          returned: plan.returns.length,
          skipped: plan.skipped.length,
          resumedSlots: result.alreadyCredited.length,
        },
        "confidential daily batch: done",
      );
      return {
        ran: true,
        day,
        slots: plan.credits.length,
        credits: plan.credited.length,
        returned: plan.returns.length,
        skipped: plan.skipped.length,
        txHashes: result.txHashes,
      };
    } finally {
      lease.stop();
    }
  }

  private async finish(day: number, now: Date, plan: Plan, txHashes: Hex[], attempt: number) {
    await this.db.transaction().execute(async (tx) => {
      if (plan.credited.length > 0) {
        await tx
          .updateTable("confidential_credits")
          .set({ credited_day: day, batch_tx_hash: txHashes.at(-1) ?? null })
          .where("payment_key", "in", plan.credited)
          .where("credited_day", "is", null)
          .execute();
      }
      for (const [keys, outcome] of [
        [plan.redeemed, "redeemed"],
        [[...plan.returnedBefore, ...plan.returns], "returned"],
      ] as const) {
        if (keys.length === 0) continue;
        await tx
          .updateTable("confidential_credits")
          .set({ outcome })
          .where("payment_key", "in", keys)
          .where("credited_day", "is", null)
          .execute();
      }
      for (const s of plan.skipped) {
        await tx
          .updateTable("confidential_credits")
          .set({ problem: s.problem })
          .where("authorization_key", "=", s.authorizationKey)
          .execute();
      }
      const done = await tx
        .updateTable("confidential_batches")
        .set({
          status: "done",
          finished_at: now,
          slots: plan.credits.length,
          credits: plan.credited.length,
          total_amount: plan.credits.reduce((t, c) => t + c.amount, 0n).toString(),
          tx_hashes: JSON.stringify(txHashes),
          skipped: JSON.stringify(plan.skipped),
          attempt,
        })
        .where("day", "=", day)
        .where("owner", "=", this.opts.owner)
        .returning("day")
        .executeTakeFirst();
      if (!done) throw new LeaseLost(day);
    });
  }

  /**
   * The day's plan from the vault's ledger: each collected payment to the
   * slot of the merchant whose credit row names it; payments no settlement
   * claims to be returned (only while the day is open: a closed day's pool
   * is final); our rows the ledger does not back, skipped.
   */
  private async plan(day: number, open: boolean): Promise<Plan> {
    const ledger = await this.vault.dayPayments(day);
    const byKey = new Map(ledger.map((p) => [p.key.toLowerCase(), p]));
    const plan: Plan = {
      credits: [],
      credited: [],
      returns: [],
      redeemed: [],
      returnedBefore: [],
      skipped: [],
      settling: false,
      unattributable: [],
    };
    const bySlot = new Map<bigint, bigint>();
    let rows = await this.rowsOf(ledger.map((p) => p.key.toLowerCase()));
    const unclaimed = ledger.filter(
      (p) => p.state === "collected" && !rows.has(p.key.toLowerCase()),
    );
    if (unclaimed.length > 0) {
      const claimed = await this.settlementsOf(day, unclaimed);
      plan.settling = claimed.pending;
      // Settled, their answer lost: credit and receipt now, from the record.
      for (const s of claimed.succeeded) {
        if (!(await this.credits.recordSettled(s.authorizationKey, s.accountId))) continue;
        await this.credits
          .receiptFor(s.authorizationKey, s.accountId)
          .catch((e: unknown) =>
            this.opts.log.warn(
              { err: describeError(e), authorizationKey: s.authorizationKey },
              "could not sign a confidential receipt yet",
            ),
          );
      }
      if (claimed.succeeded.length > 0)
        rows = await this.rowsOf(ledger.map((p) => p.key.toLowerCase()));
      for (const p of unclaimed) {
        const key = p.key.toLowerCase();
        if (rows.has(key) || claimed.live.has(key)) continue;
        // Committed to a slot when collected: its merchant's, whatever we recorded.
        const { commitment } = await this.vault.payment(p.key);
        if (BigInt(commitment) !== 0n) {
          const slot = await committedSlot(this.db, p.key, commitment);
          if (slot === undefined) plan.unattributable.push(p.key);
          else bySlot.set(slot, (bySlot.get(slot) ?? 0n) + p.amount);
          continue;
        }
        if (open) plan.returns.push(p.key);
      }
    }
    for (const p of ledger) {
      const key = p.key.toLowerCase();
      const row = rows.get(key);
      if (p.state === "redeemed") plan.redeemed.push(key);
      if (p.state === "returned") plan.returnedBefore.push(key);
      if (p.state !== "collected" || !row) continue;
      if (BigInt(row.amount) !== p.amount) {
        // Cannot happen (the vault collected the signed value our row holds);
        // the vault's amount is what the pool holds, so it is what is credited.
        this.opts.log.error(
          { paymentKey: key, recorded: row.amount, collected: p.amount.toString() },
          "a confidential credit's amount differs from what the vault collected",
        );
      }
      plan.credited.push(key);
      bySlot.set(row.slot, (bySlot.get(row.slot) ?? 0n) + p.amount);
    }
    plan.credits = [...bySlot].map(([slot, amount]) => ({ slot, amount }));
    // Our rows for the day that the ledger does not back.
    const claimedForDay = await this.db
      .selectFrom("confidential_credits")
      .select(["authorization_key", "payment_key"])
      .where("day", "=", day)
      .where("credited_day", "is", null)
      .where("outcome", "is", null)
      .where("problem", "is", null)
      .execute();
    for (const r of claimedForDay) {
      const onChain = r.payment_key ? byKey.get(r.payment_key.toLowerCase()) : undefined;
      if (!onChain) {
        plan.skipped.push({
          authorizationKey: r.authorization_key,
          problem: `the vault collected no such payment on ${dayToDate(day)}`,
        });
      }
    }
    return plan;
  }

  private async rowsOf(
    keys: string[],
  ): Promise<Map<string, { amount: string; slot: bigint; outcome: string | null }>> {
    const rows = new Map<string, { amount: string; slot: bigint; outcome: string | null }>();
    for (let i = 0; i < keys.length; i += 1000) {
      const found = await this.db
        .selectFrom("confidential_credits as c")
        .innerJoin("confidential_merchants as m", "m.account_id", "c.account_id")
        .select(["c.payment_key", "c.amount", "c.outcome", "m.slot"])
        .where("c.payment_key", "in", keys.slice(i, i + 1000))
        .execute();
      for (const r of found) {
        if (r.payment_key && r.slot !== null) {
          rows.set(r.payment_key.toLowerCase(), {
            amount: r.amount,
            slot: BigInt(r.slot),
            outcome: r.outcome,
          });
        }
      }
    }
    return rows;
  }

  /**
   * Our live settlements (pending or succeeded) of payments the vault
   * collected without a credit row of ours: by payer, around the day, then
   * matched on the key of the authorization each settled.
   */
  private async settlementsOf(day: number, payments: CollectedPayment[]) {
    const wanted = new Set(payments.map((p) => p.key.toLowerCase()));
    const payers = [...new Set(payments.map((p) => p.payer.toLowerCase()))];
    const live = new Set<string>();
    const succeeded: { authorizationKey: string; accountId: string }[] = [];
    let pending = false;
    for (let i = 0; i < payers.length; i += 500) {
      const rows = await this.db
        .selectFrom("settlements")
        .select(["authorization_key", "account_id", "status", "request"])
        .where("pay_to", "=", this.vault.address.toLowerCase())
        .where("payer", "in", payers.slice(i, i + 500))
        .where("status", "in", ["pending", "succeeded"])
        .where("started_at", ">=", dayStart(day - 1))
        .where("started_at", "<", dayStart(day + 2))
        .execute();
      for (const r of rows) {
        const auth = authorizationOf(r.request);
        if (!auth || !r.authorization_key) continue;
        const key = this.vault.paymentKey(getAddress(auth.from), auth.nonce).toLowerCase();
        if (!wanted.has(key)) continue;
        live.add(key);
        if (r.status === "pending") pending = true;
        else succeeded.push({ authorizationKey: r.authorization_key, accountId: r.account_id });
      }
    }
    return { live, succeeded, pending };
  }

  private async claim(day: number, now: Date): Promise<boolean> {
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
      .returning("day")
      .executeTakeFirst();
    return row !== undefined;
  }

  /**
   * Renews the day's lease while the batch runs (a third of the lease each
   * time, on the caller's clock advanced by the time spent), so a batch
   * longer than the lease is not resumed by another replica meanwhile.
   * `lost` turns true once another replica holds it, or a renewal fails:
   * the run stops before its next transaction.
   */
  private keepLease(day: number, now: Date): { lost: boolean; stop(): void } {
    const started = Date.now();
    const state = { lost: false, stop: () => clearInterval(timer) };
    const timer = setInterval(
      () => {
        const at = now.getTime() + (Date.now() - started);
        void this.db
          .updateTable("confidential_batches")
          .set({ lease_until: new Date(at + this.opts.leaseMs) })
          .where("day", "=", day)
          .where("owner", "=", this.opts.owner)
          .where("status", "=", "running")
          .returning("day")
          .executeTakeFirst()
          .then((row) => {
            if (!row) state.lost = true;
          })
          .catch((e: unknown) => {
            // Unrenewed, it may run out and be resumed elsewhere: stop.
            state.lost = true;
            this.opts.log.warn({ err: describeError(e), day }, "could not renew the batch lease");
          });
      },
      Math.max(1_000, Math.floor(this.opts.leaseMs / 3)),
    );
    timer.unref();
    return state;
  }
}
