/**
 * At start, each network's chain identity against the one the database knew
 * (see chainIdentities.ts); returns, per network, the instant before which
 * records belong to an earlier chain.
 */
import type { Db } from "../../storage/db.js";
import type { Logger } from "../../lib/logger.js";
import type { ChainFamily } from "../../chains/ports.js";
import { checkChainIdentity } from "./chainIdentities.js";

export async function checkChains(
  db: Db,
  families: readonly ChainFamily[],
  log: Logger,
): Promise<Map<string, Date>> {
  const since = new Map<string, Date>();
  for (const family of families) {
    // Null: the family has no value naming its chain; nothing to check.
    if (!family.identity) continue;
    for (const network of family.networks().keys()) {
      const genesis = await family.identity(network).catch(() => undefined);
      if (!genesis) continue;
      const check = await checkChainIdentity(db, network, genesis);
      since.set(network, check.since);
      if (check.replaced) {
        log.error(
          { network, previousGenesis: check.previous, genesis },
          "this network's chain is not the one the database knew (a fresh devnet, or an RPC on another chain); settlements recorded before now will not be reconciled against it",
        );
      }
    }
  }
  return since;
}
