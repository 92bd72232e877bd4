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
    const write = this.records.recordFinished(reference, status, block, fee, cause);
    // Inside a settle that writes its outcome next: that write waits for
    // this one, so the two reach the database together, not one database
    // turn after the other, and the answer still leaves after both.
    const pending = currentSettlement()?.notes.journalWrites;
    if (!pending) return write;
    pending.push(write.catch((e: unknown) => this.records.journalWriteLost(reference, e)));
    return Promise.resolve();
  }

  failedFeeExposure(network: string, since: Date): Promise<FailedFeeExposure> {
    return this.records.failedFeeExposure(network, since);
  }
}
