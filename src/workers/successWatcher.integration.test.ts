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
  const row = await recorder.reads.get(ids[0]!);
  assert.equal(row?.status, "failed", "the oldest, said twice in a row, is recorded failed");
  const kept = await recorder.reads.get(ids[SUCCESSES - 1]!);
  assert.equal(kept?.status, "succeeded");
});

/** The stub chain's transaction hash for success `n`. */
const hashOf = (n: number) => `0x${n.toString(16).padStart(64, "0")}`;
/** Which success a pending settlement is, from the stub's request. */
const numberOf = (pending: PendingSettlement) => (pending.request as unknown as { n: number }).n;

test("successes the chain still holds landed are confirmed together; only the others are asked one at a time", async () => {
  const asked = new Set<number>();
  const together: { network: string; references: readonly string[] }[] = [];
  const watcher = new SuccessWatcher({
    recorder,
    stillLanded: (network, references) => {
      together.push({ network, references });
      // Every transaction but those of successes 5 and 6.
      const away = new Set([hashOf(5), hashOf(6)]);
      return Promise.resolve(new Set(references.filter((r) => !away.has(r))));
    },
    reconcile: (pending) => {
      asked.add(numberOf(pending));
      return Promise.resolve({ status: "succeeded", transaction: hashOf(numberOf(pending)) });
    },
    log: createLogger("silent"),
    windowMs: 60_000,
  });
  for (let pass = 0; pass < 2; pass++) await watcher.runOnce();
  assert.deepEqual([...asked].sort(), [5, 6], "only the two the joint read left out");
  assert.ok(together.length >= 2, "one joint read a pass");
  assert.ok(
    together.every((t) => t.network === "eip155:8453" && t.references.length <= 200),
    "a page's successes of one network, together",
  );
  const confirmed = new Set(together.flatMap((t) => t.references));
  assert.ok(confirmed.has(hashOf(SUCCESSES - 1)) && confirmed.has(hashOf(1)), "the whole window");
});

test("a joint read that fails confirms nothing: each success of the page is asked one at a time", async () => {
  let asked = 0;
  const watcher = new SuccessWatcher({
    recorder,
    stillLanded: () => Promise.reject(new Error("the node is down")),
    reconcile: (pending) => {
      asked++;
      return Promise.resolve({ status: "succeeded", transaction: hashOf(numberOf(pending)) });
    },
    log: createLogger("silent"),
    windowMs: 60_000,
  });
  await watcher.runOnce();
  assert.equal(asked, 200, "a whole page, one at a time");
});

test("networks whose successes are final are not watched", async () => {
  let asked = 0;
  for (const networks of [[], ["xrpl:0"]]) {
    const watcher = new SuccessWatcher({
      recorder,
      networks,
      stillLanded: (_network, references) => {
        asked += references.length;
        return Promise.resolve(new Set(references));
      },
      reconcile: () => {
        asked++;
        return Promise.resolve({ status: "failed", reason: "x", message: "taken back" });
      },
      log: createLogger("silent"),
      windowMs: 60_000,
    });
    await watcher.runOnce();
  }
  assert.equal(asked, 0, "none of the successes, all on eip155:8453, was asked");
  const kept = await recorder.reads.get(ids[SUCCESSES - 1]!);
  assert.equal(kept?.status, "succeeded");
});

test("a success re-sent after a reorg is followed past the window until the chain decides it", async () => {
  const network = "eip155:7777";
  const id = randomUUID();
  const row = await database.db
    .selectFrom("settlements")
    .select(["account_id", "api_key_id"])
    .where("id", "=", ids[0]!)
    .executeTakeFirstOrThrow();
  const finished = new Date();
  await database.db
    .insertInto("settlements")
    .values(
      succeededRow({
        id,
        account_id: row.account_id,
        api_key_id: row.api_key_id,
        network,
        transaction: `0x${"77".repeat(32)}`,
        started_at: finished,
        finished_at: finished,
        request: JSON.stringify({ paymentRequirements: { network }, n: -1 }),
      }),
    )
    .execute();
  // The chain's word: first the transaction is gone and sent again, then mined.
  const answers: ReconcileOutcome[] = [
    { status: "pending", transaction: `0x${"77".repeat(32)}` },
    { status: "succeeded", transaction: `0x${"77".repeat(32)}` },
  ];
  let asked = 0;
  let windowMs = 60_000;
  const watcher = new SuccessWatcher({
    recorder,
    reconcile: () => Promise.resolve(answers[Math.min(asked++, answers.length - 1)]!),
    log: createLogger("silent"),
    get windowMs() {
      return windowMs;
    },
    networks: [network],
  });
  await watcher.runOnce();
  assert.equal(asked, 1, "asked once while in the window: re-sent");
  windowMs = 1; // the success is now older than the window
  await watcher.runOnce();
  assert.equal(asked, 2, "still followed past the window");
  // Mined on that pass: it is followed until the transaction that landed
  // has been watched for a window of its own (1 ms here), then let go.
  const landed = Date.now();
  while (Date.now() <= landed + 1) await new Promise((r) => setImmediate(r));
  await watcher.runOnce();
  assert.equal(asked, 2, "decided (mined) and watched for its window: no longer followed");
  const after = await recorder.reads.get(id);
  assert.equal(after?.status, "succeeded");
});

test("a success whose reads fail is no verdict: it stays succeeded and is asked again past the window until the chain answers", async () => {
  const network = "eip155:7778";
  const id = randomUUID();
  const owner = await database.db
    .selectFrom("settlements")
    .select(["account_id", "api_key_id"])
    .where("id", "=", ids[0]!)
    .executeTakeFirstOrThrow();
  const finished = new Date();
  const transaction = `0x${"78".repeat(32)}`;
  await database.db
    .insertInto("settlements")
    .values(
      succeededRow({
        id,
        account_id: owner.account_id,
        api_key_id: owner.api_key_id,
        network,
        transaction,
        started_at: finished,
        finished_at: finished,
        request: JSON.stringify({ paymentRequirements: { network }, n: -2 }),
      }),
    )
    .execute();
  // The chain cannot be read on the first three asks; then it answers.
  let asked = 0;
  let windowMs = 60_000;
  const watcher = new SuccessWatcher({
    recorder,
    reconcile: () =>
      ++asked <= 3
        ? Promise.reject(new Error("the RPC is down"))
        : Promise.resolve({ status: "succeeded", transaction }),
    reland: () => Promise.resolve({ status: "failed", reason: "x", message: "cannot land" }),
    log: createLogger("silent"),
    get windowMs() {
      return windowMs;
    },
    networks: [network],
  });
  await watcher.runOnce();
  windowMs = 1; // the success is now older than the window
  await watcher.runOnce();
  await watcher.runOnce();
  assert.equal(asked, 3, "asked on every pass, past the window");
  assert.equal((await recorder.reads.get(id))?.status, "succeeded", "no verdict yet");
  await watcher.runOnce();
  assert.equal(asked, 4, "answered");
  await watcher.runOnce();
  assert.equal(asked, 4, "answered: no longer asked");
  assert.equal((await recorder.reads.get(id))?.status, "succeeded");
});
