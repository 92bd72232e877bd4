/**
 * The group-commit batcher on its own: an idle batcher flushes at once,
 * items arriving during a flush share the next one in arrival order, batches
 * are bounded, each caller gets its own item's result, and one failing item
 * fails only itself, with no item lost or written twice.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { GroupCommit, type Flush } from "./groupCommit.js";

/** A flush that holds each batch until the test lets it go, then doubles every item. */
function heldFlush() {
  const batches: number[][] = [];
  const releases: (() => void)[] = [];
  const flush: Flush<number, number> = async (items) => {
    batches.push([...items]);
    await new Promise<void>((r) => releases.push(r));
    return items.map((i) => ({ status: "fulfilled", value: i * 2 }));
  };
  const releaseNext = async () => {
    while (releases.length === 0) await new Promise((r) => setImmediate(r));
    releases.shift()!();
  };
  return { batches, flush, releaseNext };
}

describe("group commit", () => {
  test("an item that finds the batcher idle is flushed at once: with the clock stopped", async (t) => {
    // Timers never fire while mocked: a batcher that waited for one would
    // never answer.
    t.mock.timers.enable({ apis: ["setTimeout", "setInterval"] });
    const batches: number[][] = [];
    const gc = new GroupCommit<number, number>(
      async (items) => {
        batches.push([...items]);
        return items.map((i) => ({ status: "fulfilled", value: i }));
      },
      { maxBatch: 10 },
    );
    let answer: number | undefined;
    void gc.submit(7).then((v) => (answer = v));
    for (let turn = 0; turn < 10 && answer === undefined; turn++) {
      await new Promise((r) => setImmediate(r));
    }
    assert.equal(answer, 7, "answered within a few turns of the event loop, no timer fired");
    assert.deepEqual(batches, [[7]]);
  });

  test("items submitted in the same turn of the event loop share the first flush", async () => {
    const batches: number[][] = [];
    const gc = new GroupCommit<number, number>(
      async (items) => {
        batches.push([...items]);
        return items.map((i) => ({ status: "fulfilled", value: i }));
      },
      { maxBatch: 10 },
    );
    const first = gc.submit(1);
    // As a second request handled after the first one's await would.
    const second = Promise.resolve().then(() => gc.submit(2));
    assert.deepEqual(await Promise.all([first, second]), [1, 2]);
    assert.deepEqual(batches, [[1, 2]]);
  });

  test("items arriving during a flush share the next flush, in arrival order", async () => {
    const { batches, flush, releaseNext } = heldFlush();
    const gc = new GroupCommit(flush, { maxBatch: 100 });
    const first = gc.submit(1);
    await new Promise((r) => setImmediate(r)); // the first flush is running
    const later = [2, 3, 4, 5].map((i) => gc.submit(i));
    assert.equal(gc.waiting, 4);
    await releaseNext();
    assert.equal(await first, 2);
    await releaseNext();
    assert.deepEqual(await Promise.all(later), [4, 6, 8, 10], "each caller gets its own result");
    assert.deepEqual(batches, [[1], [2, 3, 4, 5]]);
  });

  test("a flush takes at most maxBatch items; the rest wait for the next ones", async () => {
    const { batches, flush, releaseNext } = heldFlush();
    const gc = new GroupCommit(flush, { maxBatch: 3 });
    const all = Array.from({ length: 8 }, (_, i) => gc.submit(i));
    for (let i = 0; i < 3; i++) await releaseNext();
    assert.deepEqual(await Promise.all(all), [0, 2, 4, 6, 8, 10, 12, 14]);
    assert.deepEqual(batches, [
      [0, 1, 2],
      [3, 4, 5],
      [6, 7],
    ]);
  });

  test("an item refused on its merits refuses only itself and is not flushed again", async () => {
    let flushes = 0;
    const gc = new GroupCommit<number, number>(
      async (items) => {
        flushes++;
        return items.map((i) =>
          i % 2 === 0
            ? { status: "fulfilled", value: i }
            : { status: "rejected", reason: new Error(`odd ${i}`) },
        );
      },
      { maxBatch: 10 },
    );
    const results = await Promise.allSettled([1, 2, 3, 4].map((i) => gc.submit(i)));
    assert.deepEqual(
      results.map((r) => r.status),
      ["rejected", "fulfilled", "rejected", "fulfilled"],
    );
    assert.equal(flushes, 1);
  });

  test("a failing row fails only its caller: the others are written once each, none is lost", async () => {
    // An atomic flush: it writes all of its batch, or (when the batch holds
    // a bad item) nothing.
    const written: number[] = [];
    const BAD = 13;
    const gc = new GroupCommit<number, number>(
      async (items) => {
        if (items.includes(BAD)) throw new Error("a row violates a constraint");
        written.push(...items);
        return items.map((i) => ({ status: "fulfilled", value: i }));
      },
      { maxBatch: 64 },
    );
    const items = Array.from({ length: 40 }, (_, i) => i);
    const results = await Promise.allSettled(items.map((i) => gc.submit(i)));
    for (const [i, r] of results.entries()) {
      if (i === BAD) {
        assert.equal(r.status, "rejected");
        assert.match(String((r as PromiseRejectedResult).reason), /violates/);
      } else {
        assert.deepEqual(r, { status: "fulfilled", value: i });
      }
    }
    assert.deepEqual(
      [...written].sort((a, b) => a - b),
      items.filter((i) => i !== BAD),
      "every good item written exactly once",
    );
  });

  test("when the whole database fails, every caller is told so, and the batcher recovers", async () => {
    let down = true;
    const gc = new GroupCommit<number, number>(
      async (items) => {
        if (down) throw new Error("connection refused");
        return items.map((i) => ({ status: "fulfilled", value: i }));
      },
      { maxBatch: 8 },
    );
    const results = await Promise.allSettled([1, 2, 3, 4, 5].map((i) => gc.submit(i)));
    assert.ok(results.every((r) => r.status === "rejected"));
    down = false;
    assert.equal(await gc.submit(6), 6);
  });

  test("a flush that answers the wrong number of items fails them all and is not repeated", async () => {
    let flushes = 0;
    const gc = new GroupCommit<number, number>(
      async () => {
        flushes++;
        return [{ status: "fulfilled", value: 0 }];
      },
      { maxBatch: 8 },
    );
    const results = await Promise.allSettled([1, 2, 3].map((i) => gc.submit(i)));
    assert.ok(results.every((r) => r.status === "rejected"));
    assert.equal(flushes, 1);
  });
});
