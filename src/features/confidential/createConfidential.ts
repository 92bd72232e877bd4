/**
 * Confidential settlement, assembled: merchants and their mode, the settle
 * gate with credits and receipts, the daily batch and withdrawals. Without a
 * privacy contract (`vault` absent) only the status answers, saying it is
 * not available, and payments that name the feature are refused.
 */
import { randomUUID } from "node:crypto";
import type { Kysely } from "kysely";
import type {
  ConfidentialVaultFactory,
  ConfidentialVaultOptions,
} from "../../chains/confidentialPort.js";
import type { Logger } from "../../lib/logger.js";
import type { Database } from "../../storage/schema.js";
import { ConfidentialCredits } from "./credits.js";
import { ConfidentialGate } from "./confidentialGate.js";
import { DailyBatch } from "./dailyBatch.js";
import { ConfidentialMerchants } from "./merchants.js";
import type { ConfidentialVault } from "./vaultPort.js";
import { ConfidentialWithdrawals } from "./withdrawals.js";
import { DbOperatorLease } from "./operatorLease.js";

export interface ConfidentialFeature {
  merchants: ConfidentialMerchants;
  gate: ConfidentialGate;
  /** Quota units one confidential settlement costs: the tier fee shown before enabling. */
  units: number;
  credits?: ConfidentialCredits;
  batch?: DailyBatch;
  withdrawals?: ConfidentialWithdrawals;
  vault?: ConfidentialVault;
}

function createConfidential(opts: {
  db: Kysely<Database>;
  vault: ConfidentialVault | undefined;
  log: Logger;
  units: number;
  /** This replica's id, for the batch lease. */
  owner: string;
  batchLeaseMs: number;
}): ConfidentialFeature {
  const { db, vault, log } = opts;
  const merchants = new ConfidentialMerchants(db, vault);
  if (!vault) {
    return {
      merchants,
      units: opts.units,
      gate: new ConfidentialGate(merchants, undefined, undefined, log),
    };
  }
  const credits = new ConfidentialCredits(db, vault, log);
  return {
    merchants,
    units: opts.units,
    vault,
    credits,
    gate: new ConfidentialGate(
      merchants,
      credits,
      { network: vault.network, address: vault.address, asset: vault.asset },
      log,
    ),
    batch: new DailyBatch(db, vault, credits, {
      owner: opts.owner,
      leaseMs: opts.batchLeaseMs,
      log,
    }),
    withdrawals: new ConfidentialWithdrawals(db, vault, merchants, log),
  };
}

/**
 * Confidential settlement as the service opens it: the vault client when a
 * vault is configured (loaded through `loadVault`, from the family whose
 * chain holds it), and the feature over it; `close` lets the client go.
 */
export async function openConfidential(opts: {
  db: Kysely<Database>;
  vault: ConfidentialVaultOptions | undefined;
  loadVault: () => Promise<ConfidentialVaultFactory>;
  log: Logger;
  settings: { unitsPerSettlement: number; batchLeaseMs: number };
}): Promise<ConfidentialFeature & { close(): Promise<void> }> {
  const log = opts.log.child({ component: "confidential" });
  const owner = randomUUID();
  // One replica at a time sends with the operator key.
  const operatorLease = new DbOperatorLease(opts.db, { holder: owner });
  const vault = opts.vault
    ? await (
        await opts.loadVault()
      )({ operatorLease, ...opts.vault, log })
    : undefined;
  const feature = createConfidential({
    db: opts.db,
    vault,
    log,
    units: opts.settings.unitsPerSettlement,
    owner,
    batchLeaseMs: opts.settings.batchLeaseMs,
  });
  return { ...feature, close: async () => void (await vault?.close()) };
}
