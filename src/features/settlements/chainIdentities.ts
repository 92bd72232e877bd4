/**
 * Which chain each network's records belong to. The first time a network is
 * seen, its identity (the genesis hash) is stored; when a later start sees
 * another one, the chain was replaced, and records started before that
 * moment belong to a chain that is gone: the reconciler leaves them alone
 * instead of deciding them against a chain that never saw them.
 */
import type { Db } from "../../storage/db.js";

export interface ChainIdentityCheck {
  network: string;
  /** Records started before this belong to an earlier chain. */
  since: Date;
  /** True when this start found a different chain than the database knew. */
  replaced: boolean;
  previous?: string;
}

export async function checkChainIdentity(
  db: Db,
  network: string,
  genesis: string,
): Promise<ChainIdentityCheck> {
  const known = await db
    .selectFrom("chain_identities")
    .selectAll()
    .where("network", "=", network)
    .executeTakeFirst();
  if (known && known.genesis === genesis) {
    return { network, since: new Date(known.since), replaced: false };
  }
  const since = new Date();
  await db
    .insertInto("chain_identities")
    .values({ network, genesis, since })
    .onConflict((oc) => oc.column("network").doUpdateSet({ genesis, since }))
    .execute();
  // The first sighting is not a replacement: there was nothing before it.
  return known
    ? { network, since, replaced: true, previous: known.genesis }
    : { network, since: new Date(0), replaced: false };
}
