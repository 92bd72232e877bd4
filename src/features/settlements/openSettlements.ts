/**
 * The settlement records and what the chain families write through: the
 * monthly quota (absent when settlements are not metered), the recorder
 * (the settlements table's one writer), and the ports the families get from
 * the service (the transaction journal, the signer leases shared between
 * replicas, the store of settlements answered `settlement_pending`, the
 * record of gas given to payers).
 */
import type { Logger } from "../../lib/logger.js";
import type { OpenedDb } from "../../storage/db.js";
import type { PlanLimits } from "../plans/plans.js";
import { createQuotaLedger } from "../plans/quotaLedger.js";
import { DbSignerLeases } from "../signers/dbSignerLeases.js";
import { DbPendingSettlementStore } from "./pendingSettlementStore.js";
import { SettlementRecorder } from "./settlementRecorder.js";
import { DbTransactionJournal } from "./transactionJournal.js";
import { DbSponsoredFundings } from "./sponsoredFundings.js";

export function openSettlements(
  /** `finishing`, `sending`: the same database in the lanes of settles in flight (see `OpenedDb`). */
  { db, finishing = db, sending = finishing }: Pick<OpenedDb, "db" | "finishing" | "sending">,
  plans: PlanLimits & { metering: boolean; sponsoredFundingsPerDay?: number },
  log: Logger,
  reportError: (e: unknown, what: string) => void,
) {
  const quota = createQuotaLedger(db, plans, reportError);
  const recorder = new SettlementRecorder(
    db,
    log.child({ component: "settlements" }),
    quota,
    finishing,
    sending,
  );
  return {
    quota,
    recorder,
    ports: {
      journal: new DbTransactionJournal(recorder.journal),
      leases: new DbSignerLeases(db),
      pendingSettlements: new DbPendingSettlementStore(db),
      sponsoredFundings: new DbSponsoredFundings(db, plans.sponsoredFundingsPerDay ?? 100),
    },
  };
}
