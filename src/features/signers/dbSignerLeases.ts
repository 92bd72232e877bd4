/**
 * Signer leases on the database (see chains/evm/signer/leaseKeeper.ts).
 *
 * Fair share: ceil(accounts / live replicas). A replica is live while its
 * row in facilitator_replicas is unexpired; it renews that row and its
 * leases on every sync. Taking an account only succeeds on a free or expired
 * lease (a conditional upsert), so two replicas never hold one account.
 */
import { sql } from "kysely";
import type { SignerLeases } from "../../chains/ports.js";
import type { Db } from "../../storage/db.js";

export class DbSignerLeases implements SignerLeases {
  constructor(private readonly db: Db) {}

  async sync(args: {
    network: string;
    addresses: readonly string[];
    holder: string;
    ttlMs: number;
    releasable: readonly string[];
  }): Promise<string[]> {
    const { network, holder } = args;
    const until = new Date(Date.now() + args.ttlMs);
    const addresses = args.addresses.map((a) => a.toLowerCase());
    await this.db
      .insertInto("facilitator_replicas")
      .values({ holder, expires_at: until })
      .onConflict((oc) => oc.column("holder").doUpdateSet({ expires_at: until }))
      .execute();
    const renewed = await this.db
      .updateTable("signer_leases")
      .set({ expires_at: until })
      .where("network", "=", network)
      .where("holder", "=", holder)
      .returning("address")
      .execute();
    const held = new Set(renewed.map((r) => r.address));
    const live = await this.db
      .selectFrom("facilitator_replicas")
      .select((e) => e.fn.countAll<string>().as("n"))
      .where("expires_at", ">", sql<Date>`now()`)
      .executeTakeFirstOrThrow();
    const replicas = Math.max(1, Number(live.n));
    const share = Math.ceil(addresses.length / replicas);

    if (held.size > share) {
      const extra = args.releasable.map((a) => a.toLowerCase()).filter((a) => held.has(a));
      for (const address of extra.slice(0, held.size - share)) {
        await this.db
          .deleteFrom("signer_leases")
          .where("network", "=", network)
          .where("address", "=", address)
          .where("holder", "=", holder)
          .execute();
        held.delete(address);
      }
    }
    for (const address of addresses) {
      if (held.size >= share) break;
      if (held.has(address)) continue;
      const taken = await this.db
        .insertInto("signer_leases")
        .values({ network, address, holder, expires_at: until })
        .onConflict((oc) =>
          oc
            .columns(["network", "address"])
            .doUpdateSet({ holder, expires_at: until })
            .where("signer_leases.expires_at", "<", sql<Date>`now()`),
        )
        .returning("address")
        .executeTakeFirst();
      if (taken) held.add(address);
    }
    return [...held];
  }

  async releaseAll(holder: string): Promise<void> {
    await this.db.deleteFrom("signer_leases").where("holder", "=", holder).execute();
    await this.db.deleteFrom("facilitator_replicas").where("holder", "=", holder).execute();
  }
}
