/**
 * The record of gas sent to payers for their own approve of Permit2
 * (erc20ApprovalGasSponsoring), on the database so every replica and every
 * restart sees it. A stranger costs us one approve's gas at most once: a
 * payer funded whose payment did not settle is never funded again, and
 * each account's fundings over a day are budgeted. A funding is reserved
 * before it is sent, bound to the settlement in the current scope; it
 * counts as paid for once that settlement succeeded.
 */
import { sql } from "kysely";
import type { FundingRefusal, SponsoredFundings } from "../../chains/ports.js";
import { currentSettlement } from "../../chains/settlementScope.js";
import type { Db } from "../../storage/db.js";

const DAY_MS = 86_400_000;

const ALREADY_FUNDED: FundingRefusal = {
  kind: "already_funded",
  message:
    "this payer was already sent gas for an approve whose payment did not settle; it pays its own gas for the approve now",
};

export class DbSponsoredFundings implements SponsoredFundings {
  constructor(
    private readonly db: Db,
    /** Fundings one account's settles may make in 24 hours. */
    private readonly perDay: number,
  ) {}

  async refusal(network: string, payer: string): Promise<FundingRefusal | undefined> {
    await this.learnSettled(network, payer);
    const open = await this.db
      .selectFrom("sponsored_fundings")
      .select("id")
      .where("network", "=", network)
      .where("payer", "=", payer.toLowerCase())
      .where("settled", "=", false)
      .executeTakeFirst();
    return open ? ALREADY_FUNDED : undefined;
  }

  async reserve(network: string, payer: string, wei: bigint): Promise<FundingRefusal | undefined> {
    const settlementId = currentSettlement()?.id;
    if (!settlementId) {
      // Every settle runs in a scope; funding outside one could not be
      // attributed to an account or budgeted, so it is not made.
      return {
        kind: "budget_spent",
        message: "no settlement to attribute the funding to",
      };
    }
    await this.learnSettled(network, payer);
    // The account's row is locked while its budget is counted and the
    // funding inserted, so concurrent settles (on any replica) cannot all
    // pass the count and overshoot the budget together.
    return this.db.transaction().execute(async (trx) => {
      const owner = await trx
        .selectFrom("accounts")
        .select("accounts.id")
        .where(
          "accounts.id",
          "=",
          trx.selectFrom("settlements").select("account_id").where("id", "=", settlementId),
        )
        .forUpdate()
        .executeTakeFirst();
      if (!owner) {
        return { kind: "budget_spent", message: "the settlement is not recorded" } as const;
      }
      const since = new Date(Date.now() - DAY_MS);
      const { n } = await trx
        .selectFrom("sponsored_fundings")
        .select((eb) => eb.fn.countAll<string>().as("n"))
        .where("account_id", "=", owner.id)
        .where("funded_at", ">=", since)
        .executeTakeFirstOrThrow();
      if (Number(n) >= this.perDay) {
        return {
          kind: "budget_spent",
          message: `this account's settles funded ${n} payers' approve gas in the last 24 hours, its budget (SPONSORED_FUNDINGS_PER_DAY); the payer can pay its own gas for the approve`,
        } as const;
      }
      // The unique index on a payer's open funding makes this the one
      // decision across replicas: a second reservation inserts nothing.
      const inserted = await trx
        .insertInto("sponsored_fundings")
        .values({
          network,
          payer: payer.toLowerCase(),
          settlement_id: settlementId,
          account_id: owner.id,
          wei: wei.toString(),
        })
        .onConflict((oc) => oc.doNothing())
        .returning("id")
        .executeTakeFirst();
      return inserted ? undefined : ALREADY_FUNDED;
    });
  }

  async release(network: string, payer: string): Promise<void> {
    const settlementId = currentSettlement()?.id;
    if (!settlementId) return;
    await this.db
      .deleteFrom("sponsored_fundings")
      .where("network", "=", network)
      .where("payer", "=", payer.toLowerCase())
      .where("settlement_id", "=", settlementId)
      .execute();
  }

  /** A payer's open funding whose settlement has since succeeded is paid for. */
  private async learnSettled(network: string, payer: string): Promise<void> {
    await sql`
      UPDATE sponsored_fundings f SET settled = true
      FROM settlements s
      WHERE s.id = f.settlement_id AND s.status = 'succeeded'
        AND f.network = ${network} AND f.payer = ${payer.toLowerCase()} AND NOT f.settled
    `.execute(this.db);
  }
}
