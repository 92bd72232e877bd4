import { test } from "node:test";
import assert from "node:assert/strict";
import { Gate } from "./gate.js";

test("at most `max` tasks run at once; the rest run in arrival order", async () => {
  const gate = new Gate(2);
  let running = 0;
  let peak = 0;
  const order: number[] = [];
  const releases: (() => void)[] = [];
  const tasks = [0, 1, 2, 3, 4].map((i) =>
    gate.run(async () => {
      running++;
      peak = Math.max(peak, running);
      order.push(i);
      await new Promise<void>((r) => releases.push(r));
      running--;
      return i;
    }),
  );
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(order, [0, 1]);
  assert.equal(gate.queued, 3);
  while (releases.length > 0) {
    releases.shift()!();
    await new Promise((r) => setImmediate(r));
  }
  assert.deepEqual(await Promise.all(tasks), [0, 1, 2, 3, 4]);
  assert.deepEqual(order, [0, 1, 2, 3, 4]);
  assert.equal(peak, 2);
});

test("a failing task frees its slot", async () => {
  const gate = new Gate(1);
  await assert.rejects(
    gate.run(async () => {
      throw new Error("boom");
    }),
    /boom/,
  );
  assert.equal(await gate.run(async () => "next"), "next");
  assert.throws(() => new Gate(0), RangeError);
});
