import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { PayerLanes, type LaneRefusal } from "./payerLanes.js";

const lanes = (maxWaiting = 8, maxWaitMs = 5_000) =>
  new PayerLanes({ maxWaiting, maxWaitMs, leaseMs: 10_000 });

/** A settle whose end the test decides. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { open, opened };
}

describe("payer lanes", () => {
  test("one payer's settles run one at a time, in arrival order", async () => {
    const l = lanes();
    const order: string[] = [];
    let running = 0;
    let most = 0;
    const settle = (name: string) =>
      l.run(
        "eip155:8453|0xpayer",
        async () => {
          running += 1;
          most = Math.max(most, running);
          order.push(name);
          await new Promise((r) => setTimeout(r, 5));
          running -= 1;
          return name;
        },
        (why: LaneRefusal) => why,
      );
    const answers = await Promise.all(["a", "b", "c", "d", "e"].map(settle));
    assert.deepEqual(answers, ["a", "b", "c", "d", "e"]);
    assert.deepEqual(order, ["a", "b", "c", "d", "e"]);
    assert.equal(most, 1);
    assert.equal(l.size, 0, "an idle lane is forgotten");
  });

  test("different payers, or one payer on two networks, do not wait for each other", async () => {
    const l = lanes();
    const first = gate();
    const held = l.run("eip155:8453|0xa", () => first.opened.then(() => "a"), String);
    const other = await l.run("eip155:8453|0xb", async () => "b", String);
    const otherNetwork = await l.run("eip155:137|0xa", async () => "a on polygon", String);
    assert.deepEqual([other, otherNetwork], ["b", "a on polygon"]);
    first.open();
    assert.equal(await held, "a");
  });

  test("a failed settle still passes the lane on", async () => {
    const l = lanes();
    const failing = l.run("k", () => Promise.reject(new Error("boom")), String);
    const next = l.run("k", async () => "next", String);
    await assert.rejects(failing, /boom/);
    assert.equal(await next, "next");
  });

  test("past maxWaiting queued settles, the next is refused at once, nothing run", async () => {
    const l = lanes(2);
    const first = gate();
    let ran = 0;
    const run = () =>
      l.run(
        "k",
        async () => {
          ran += 1;
          await first.opened;
          return "ran";
        },
        (why) => why,
      );
    const queued = [run(), run(), run()];
    assert.equal(await run(), "queue_full");
    first.open();
    assert.deepEqual(await Promise.all(queued), ["ran", "ran", "ran"]);
    assert.equal(ran, 3);
  });

  test("a settle that waits longer than maxWaitMs is refused, and the queue behind it still moves", async () => {
    const l = lanes(8, 30);
    const first = gate();
    const held = l.run("k", () => first.opened.then(() => "first"), String);
    let ran = false;
    const waited = await l.run(
      "k",
      async () => {
        ran = true;
        return "ran";
      },
      (why) => why,
    );
    assert.equal(waited, "waited_too_long");
    assert.equal(ran, false);
    first.open();
    assert.equal(await held, "first");
    assert.equal(await l.run("k", async () => "after", String), "after");
  });
});

test("copies of one payment queue without filling the lane: each runs in turn, none refused", async () => {
  const l = new PayerLanes({ maxWaiting: 2, maxWaitMs: 5_000, leaseMs: 10_000 });
  const first = gate();
  let ran = 0;
  const copy = () =>
    l.run(
      "k",
      async () => {
        ran += 1;
        await first.opened;
        return "ran";
      },
      (why) => why,
      "authorization-1",
    );
  const copies = Array.from({ length: 10 }, copy);
  // Other payments of the payer still meet the bound (each counted once).
  const other = (n: number) =>
    l.run(
      "k",
      async () => `other ${n}`,
      (why) => why,
      `auth-${n}`,
    );
  const others = [other(2), other(3)];
  assert.equal(await other(4), "queue_full");
  first.open();
  assert.deepEqual(await Promise.all(copies), Array(10).fill("ran"));
  assert.deepEqual(await Promise.all(others), ["other 2", "other 3"]);
  assert.equal(ran, 10);
});
