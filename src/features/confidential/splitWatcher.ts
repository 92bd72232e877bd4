/**
 * The service as every merchant's watcher: once per attempt of a closed
 * day, each slot's credit as the vault holds it (decrypted with the
 * operator's permission) against the daily batch's own plan. A slot credited
 * less than its merchant's payments is challenged at once with their
 * receipts, from the operator key (anyone may send a challenge): the KMS's
 * answer, which the batch submits before any release, disputes the day and
 * the bond pays the shortfall into the slot's balance. So a split the
 * operator key wrote against our plan (a stolen key, a bug) is proven short
 * without its merchants having to act; a merchant who does not trust us
 * runs its own check (`npm run confidential:check`) as well.
 */
import type { Kysely } from "kysely";
import { paymentBlinding, paymentCommitment, type Hex } from "../../chains/confidentialPort.js";
import type { Logger } from "../../lib/logger.js";
import type { Database } from "../../storage/schema.js";
import { dayToDate, type ConfidentialCredits } from "./credits.js";
import type { ConfidentialReceipt, ConfidentialVault } from "./vaultPort.js";

export class SplitWatcher {
  /** Day and attempt whose closed split this process checked against its plan. */
  private readonly watched = new Set<string>();

  constructor(
    private readonly db: Kysely<Database>,
    private readonly vault: ConfidentialVault,
    private readonly credits: ConfidentialCredits,
    private readonly log: Logger,
  ) {}

  /**
   * Compares `day`'s closed split (attempt `attempt`) with `planned`, and
   * challenges each short slot with the receipts of its payments among
   * `paymentKeys` not yet presented. Nothing is sent for a split that
   * matches; a check that cannot finish is tried on the next pass.
   */
  async watch(
    day: number,
    attempt: number,
    planned: readonly { slot: bigint; amount: bigint }[],
    paymentKeys: readonly string[],
  ): Promise<void> {
    const id = `${day}:${attempt}`;
    if (this.watched.has(id)) return;
    const [info, now] = await Promise.all([this.vault.dayInfo(day), this.vault.chainTime()]);
    if (info.phase !== "closed" || now >= info.challengeWindowEndsAt) {
      this.watched.add(id);
      return;
    }
    for (const { slot, amount } of planned) {
      const credit = (await this.vault.dayCredit(slot, day)) ?? 0n;
      if (credit >= amount) continue;
      const rows = await this.db
        .selectFrom("confidential_credits as c")
        .innerJoin("confidential_merchants as m", "m.account_id", "c.account_id")
        .select(["c.authorization_key", "c.account_id"])
        .where("c.day", "=", day)
        .where("m.slot", "=", slot.toString())
        .where("c.payment_key", "in", [...paymentKeys])
        .execute();
      const receipts: ConfidentialReceipt[] = [];
      for (const r of rows) {
        const receipt = await this.credits.receiptFor(r.authorization_key, r.account_id);
        if (receipt && !(await this.vault.presented(receipt.key))) receipts.push(receipt);
      }
      this.log.error(
        {
          day: dayToDate(day),
          slot: slot.toString(),
          credit: credit.toString(),
          planned: amount.toString(),
        },
        "confidential daily batch: the closed split credits a slot less than its merchant's payments; challenging it with their receipts",
      );
      if (receipts.length > 0) await this.vault.challenge(receipts);
    }
    this.watched.add(id);
  }
}

/**
 * The slot a committed payment is bound to, among our merchants: the one
 * whose salt opens its commitment (the blinding is derived from the salt).
 */
export async function committedSlot(
  db: Kysely<Database>,
  key: Hex,
  commitment: Hex,
): Promise<bigint | undefined> {
  const merchants = await db
    .selectFrom("confidential_merchants")
    .select(["slot", "slot_secret"])
    .where("slot", "is not", null)
    .where("slot_secret", "is not", null)
    .execute();
  for (const m of merchants) {
    const slot = BigInt(m.slot!);
    const opened = paymentCommitment(key, slot, paymentBlinding(m.slot_secret as Hex, key));
    if (opened.toLowerCase() === commitment.toLowerCase()) return slot;
  }
  return undefined;
}
