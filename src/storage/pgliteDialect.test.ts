/**
 * The embedded database's one connection: one holder at a time, answers to
 * settles in flight first, then journal entries of transactions about to
 * leave, then new work, and no lane starved.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { ConnectionLock, type Lane } from "./pgliteDialect.js";

/** Acquires for `name` and notes the order in which holders get the lock. */
function holder(lock: ConnectionLock, order: string[], name: string, lane: Lane) {
  return lock.acquire(lane).then(() => void order.push(name));
}

/** Releases `times` times, letting each next holder in before the next release. */
async function releaseEach(lock: ConnectionLock, times: number): Promise<void> {
  for (let i = 0; i < times; i++) {
    lock.release();
    await new Promise((r) => setImmediate(r));
  }
}

describe("ConnectionLock", () => {
  test("one holder at a time; on release, answers, then journal entries, then new work", async () => {
    const lock = new ConnectionLock();
    const order: string[] = [];
    await lock.acquire("new");
    const waiting = [
      holder(lock, order, "new-1", "new"),
      holder(lock, order, "send-1", "send"),
      holder(lock, order, "new-2", "new"),
      holder(lock, order, "answer-1", "answer"),
      holder(lock, order, "send-2", "send"),
      holder(lock, order, "answer-2", "answer"),
    ];
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(order, [], "nobody else holds it while it is held");
    for (let i = 0; i < 6; i++) {
      await releaseEach(lock, 1);
      assert.equal(order.length, i + 1, "each release lets exactly one holder in");
    }
    await Promise.all(waiting);
    assert.deepEqual(order, ["answer-1", "answer-2", "send-1", "send-2", "new-1", "new-2"]);
  });

  test("new work goes after a few turns of finishing work in a row", async () => {
    const lock = new ConnectionLock();
    const order: string[] = [];
    await lock.acquire("answer");
    const waiting = [holder(lock, order, "new", "new")];
    for (let i = 1; i <= 6; i++) waiting.push(holder(lock, order, `answer-${i}`, "answer"));
    await releaseEach(lock, 7);
    await Promise.all(waiting);
    assert.ok(order.indexOf("new") <= 4, `new work waited too long: ${order.join(", ")}`);
    assert.deepEqual(
      order.filter((n) => n !== "new"),
      ["answer-1", "answer-2", "answer-3", "answer-4", "answer-5", "answer-6"],
    );
  });

  test("neither journal entries nor new work wait forever behind a stream of answers", async () => {
    const lock = new ConnectionLock();
    const order: string[] = [];
    await lock.acquire("answer");
    const waiting = [holder(lock, order, "send", "send"), holder(lock, order, "new", "new")];
    for (let i = 1; i <= 10; i++) waiting.push(holder(lock, order, `answer-${i}`, "answer"));
    await releaseEach(lock, 12);
    await Promise.all(waiting);
    assert.ok(order.indexOf("send") <= 4, `the journal entry waited too long: ${order.join(", ")}`);
    assert.ok(order.indexOf("new") <= 5, `new work waited too long: ${order.join(", ")}`);
    assert.ok(order.indexOf("send") < order.indexOf("new"), order.join(", "));
  });

  test("idle resolves once nobody holds or waits", async () => {
    const lock = new ConnectionLock();
    await lock.idle();
    await lock.acquire("new");
    const second = lock.acquire("answer");
    let idle = false;
    const done = lock.idle().then(() => (idle = true));
    lock.release();
    await second;
    await new Promise((r) => setImmediate(r));
    assert.equal(idle, false, "the second holder still has it");
    lock.release();
    await done;
    assert.equal(idle, true);
  });
});
