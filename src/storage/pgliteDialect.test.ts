/**
 * The embedded database's one connection: one holder at a time, work that
 * finishes a request in flight before new work, and new work never starved.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { ConnectionLock } from "./pgliteDialect.js";

/** Acquires for `name` and notes the order in which holders get the lock. */
function holder(lock: ConnectionLock, order: string[], name: string, finishing: boolean) {
  return lock.acquire(finishing).then(() => void order.push(name));
}

describe("ConnectionLock", () => {
  test("one holder at a time; on release, finishing work goes before new work that waited longer", async () => {
    const lock = new ConnectionLock();
    const order: string[] = [];
    await lock.acquire(false);
    const waiting = [
      holder(lock, order, "new-1", false),
      holder(lock, order, "new-2", false),
      holder(lock, order, "finish-1", true),
      holder(lock, order, "finish-2", true),
    ];
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(order, [], "nobody else holds it while it is held");
    for (let i = 0; i < 4; i++) {
      lock.release();
      await new Promise((r) => setImmediate(r));
      assert.equal(order.length, i + 1, "each release lets exactly one holder in");
    }
    await Promise.all(waiting);
    assert.deepEqual(order, ["finish-1", "finish-2", "new-1", "new-2"]);
  });

  test("new work goes after a few turns of finishing work in a row", async () => {
    const lock = new ConnectionLock();
    const order: string[] = [];
    await lock.acquire(true);
    const waiting = [holder(lock, order, "new", false)];
    for (let i = 1; i <= 6; i++) waiting.push(holder(lock, order, `finish-${i}`, true));
    for (let i = 0; i < 7; i++) {
      lock.release();
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(waiting);
    assert.ok(order.indexOf("new") <= 4, `new work waited too long: ${order.join(", ")}`);
    assert.deepEqual(
      order.filter((n) => n !== "new"),
      ["finish-1", "finish-2", "finish-3", "finish-4", "finish-5", "finish-6"],
    );
  });

  test("idle resolves once nobody holds or waits", async () => {
    const lock = new ConnectionLock();
    await lock.idle();
    await lock.acquire(false);
    const second = lock.acquire(true);
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
