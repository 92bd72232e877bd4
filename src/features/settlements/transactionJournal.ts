/**
 * The transaction journal on the database, for every chain family: each
 * transaction is written before it is broadcast and bound to the settlement
 * running in the current scope, and that settlement's row learns its
 * reference at that moment. The rows are written by `JournalRecords`
 * (journalRecords.ts, beside this file); this adapter binds each entry to
 * the settlement in scope and notes a refusal on it.
 */
import type {
  FailedFeeExposure,
  FailureCause,
  JournalEntry,
  TransactionJournal,
} from "../../chains/ports.js";
import { currentSettlement } from "../../chains/settlementScope.js";
import { SettlementDecidedError, type JournalRecords } from "./journalRecords.js";

export class DbTransactionJournal implements TransactionJournal {
  constructor(private readonly records: JournalRecords) {}

  async sent(entry: JournalEntry): Promise<void> {
    const scope = currentSettlement();
    try {
      await this.records.recordSent(entry, scope?.id);
    } catch (e) {
      // Nothing is broadcast without its journal entry. Refused because the
      // record is already final: the settle answers that record. Not
      // written: this settlement sent nothing, and the note turns its
      // answer into a 503, not a payer's failure.
      if (scope && e instanceof SettlementDecidedError) scope.notes.decidedWhileRunning = true;
      else if (scope) scope.notes.journalFailed = true;
      throw e;
    }
  }

  finished(
    reference: string,
    status: "success" | "reverted",
    block?: bigint,
    fee?: bigint,
    cause?: FailureCause,
  ): Promise<void> {
    // Inside a settle that writes its outcome next: that outcome's own
    // statement writes it, one round trip for both, and the answer still
    // leaves after both.
    const withOutcome = currentSettlement()?.notes.journalFinished;
    if (!withOutcome) return this.records.recordFinished(reference, status, block, fee, cause);
    withOutcome.push({ reference, status, block, fee, cause });
    return Promise.resolve();
  }

  failedFeeExposure(network: string, since: Date): Promise<FailedFeeExposure> {
    return this.records.failedFeeExposure(network, since);
  }
}
