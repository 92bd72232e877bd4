/**
 * For resource servers: keep every confidential receipt the facilitator
 * answers with, in a file of your own, from the first moment (Node only;
 * the checks and transaction builders are in receipts.ts).
 *
 *   import { x402ResourceServer } from "@x402/core/server";
 *   const store = new ReceiptStore("/var/lib/shop/confidential-receipts.jsonl");
 *   server.onAfterSettle(keepReceipts(store));
 *
 * `npm run confidential:check` reads the same file
 * (`CONFIDENTIAL_CHECK_RECEIPTS_FILE`).
 */
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { receiptIn, type ConfidentialReceipt } from "./receipts.js";

/** Receipts kept in a JSON-lines file of your own, one per payment. */
export class ReceiptStore {
  constructor(readonly file: string) {}

  all(): ConfidentialReceipt[] {
    if (!existsSync(this.file)) return [];
    const byKey = new Map<string, ConfidentialReceipt>();
    for (const line of readFileSync(this.file, "utf8").split("\n")) {
      if (!line.trim()) continue;
      try {
        const r = receiptIn({ extensions: { confidential: JSON.parse(line) } });
        if (r) byKey.set(r.key.toLowerCase(), r);
      } catch {
        // A torn last line (a crash mid-write) is skipped.
      }
    }
    return [...byKey.values()];
  }

  add(receipt: ConfidentialReceipt): void {
    appendFileSync(this.file, `${JSON.stringify(receipt)}\n`, { mode: 0o600 });
  }
}

/**
 * An `onAfterSettle` hook for `x402ResourceServer`: every confidential
 * receipt the facilitator answers with goes into `store` at once.
 */
export function keepReceipts(store: ReceiptStore): (context: { result: unknown }) => Promise<void> {
  return async ({ result }) => {
    const receipt = receiptIn(result);
    if (receipt) store.add(receipt);
  };
}
