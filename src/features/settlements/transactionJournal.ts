/**
 * The transaction journal on the database, for every chain family: each
 * transaction is written before it is broadcast and bound to the settlement
 * running in the current scope, and that settlement's row learns its
 * reference at that moment. The settlements table itself is written only
 * through the recorder (its one repository).
 */
import type { JournalEntry, TransactionJournal } from "../../chains/ports.js";
import { currentSettlementId } from "../../chains/settlementScope.js";
import type { SettlementRecorder } from "./settlementRecorder.js";

export class DbTransactionJournal implements TransactionJournal {
  constructor(private readonly recorder: SettlementRecorder) {}

  sent(entry: JournalEntry): Promise<void> {
    return this.recorder.recordSent(entry, currentSettlementId());
  }

  finished(reference: string, status: "success" | "reverted", block?: bigint): Promise<void> {
    return this.recorder.recordFinished(reference, status, block);
  }
}
