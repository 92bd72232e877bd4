/**
 * The reorg watch covers every success of its window, however many there
 * are: each pass asks the next page of them, older than the last page's,
 * and starts again from the newest once the window is done. A success the
 * chain says can no longer land, twice in a row, is recorded failed.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import type { OpenedDb } from "../storage/db.js";
import { createLogger } from "../lib/logger.js";
import type { PendingSettlement, ReconcileOutcome } from "../chains/ports.js";
import type { SettlementRecorder } from "../features/settlements/settlementRecorder.js";
import { SuccessWatcher } from "./successWatcher.js";
import { openRecorderFixture, succeededRow } from "../../test/support/recorder.js";

/** More than one pass asks (200). */
const SUCCESSES = 205;

let database: OpenedDb;
let recorder: SettlementRecorder;
const ids: string[] = [];
before(async () => {
  let principal: { accountId: string; keyId: string };
  ({ database, recorder, principal } = await openRecorderFixture("watched"));
  const now = Date.now();
  const rows = Array.from({ length: SUCCESSES }, (_, i) => {
    const id = randomUUID();
    ids.push(id);
    // ids[0] is the oldest success.
    const finished = new Date(now - 30_000 + i * 10);
    return succeededRow({
      id,
      account_id: principal.accountId,
      api_key_id: principal.keyId,
      transaction: `0x${i.toString(16).padStart(64, "0")}`,
      started_at: finished,
      finished_at: finished,
      // What the stub chain below tells the successes apart by.
      request: JSON.stringify({ paymentRequirements: { network: "eip155:8453" }, n: i }),
    });
  });
  await database.db.insertInto("settlements").values(rows).execute();
});
after(() => database.close());

test("every success of the window is asked in turn, and the oldest, taken back, is recorded failed", async () => {
  const asked = new Set<string>();
  const watcher = new SuccessWatcher({
    recorder,
    // The chain's word: every transaction but the oldest is on it.
    reconcile: (pending: PendingSettlement): Promise<ReconcileOutcome> => {
      const n = (pending.request as unknown as { n: number }).n;
      const tx = `0x${n.toString(16).padStart(64, "0")}`;
      asked.add(tx);
      return Promise.resolve(
        n === 0
          ? { status: "failed", reason: "settlement_interrupted", message: "superseded" }
          : { status: "succeeded", transaction: tx },
      );
    },
    log: createLogger("silent"),
    windowMs: 60_000,
  });
  for (let pass = 0; pass < 3; pass++) await watcher.runOnce();
  assert.equal(asked.size, SUCCESSES, "each success was asked");
  const row = await recorder.get(ids[0]!);
  assert.equal(row?.status, "failed", "the oldest, said twice in a row, is recorded failed");
  const kept = await recorder.get(ids[SUCCESSES - 1]!);
  assert.equal(kept?.status, "succeeded");
});
