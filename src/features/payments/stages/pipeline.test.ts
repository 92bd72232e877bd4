/**
 * The settle pipeline's stage timer: each stage is told its own time (the
 * stages after it left out), also when it answers early or throws, and the
 * figures of one settle add up to its whole time; a timer that fails changes
 * no answer. A hand-moved clock makes
 * every figure exact.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { SettleResponse } from "@x402/core/types";
import { runStages, type SettleContext, type SettleStage } from "./pipeline.js";

const answer: SettleResponse = {
  success: true,
  transaction: "0xabc",
  network: "eip155:8453",
};

function clock() {
  let now = 0;
  return { now: () => now, advance: (ms: number) => void (now += ms) };
}

/** A stage that spends `before` ms, runs the rest, then spends `after` ms. */
function wrapping(name: string, c: ReturnType<typeof clock>, before: number, after: number) {
  return {
    name,
    async run(_ctx: SettleContext, next: () => Promise<SettleResponse>) {
      c.advance(before);
      await Promise.resolve();
      const r = await next();
      c.advance(after);
      return r;
    },
  } satisfies SettleStage;
}

function last(c: ReturnType<typeof clock>, ms: number) {
  return {
    name: "mechanism",
    async run() {
      c.advance(ms);
      await Promise.resolve();
      return answer;
    },
  } satisfies SettleStage;
}

const ctx = {} as SettleContext;
const unreachable = () => Promise.reject(new Error("ran past the last stage"));

describe("runStages with a stage timer", () => {
  test("each stage is told its own time, and the times add up to the whole", async () => {
    const c = clock();
    const told: [string, number][] = [];
    const stages = [wrapping("intent", c, 5, 0), wrapping("commit", c, 0, 30), last(c, 900)];
    const r = await runStages(stages, ctx, unreachable, (s, sec) => told.push([s, sec]), c.now);
    assert.deepEqual(r, answer);
    // Inner stages return first.
    assert.deepEqual(told, [
      ["mechanism", 0.9],
      ["commit", 0.03],
      ["intent", 0.005],
    ]);
    const sum = told.reduce((a, [, s]) => a + s, 0);
    assert.equal(Math.round(sum * 1000), c.now());
  });

  test("a stage that answers without the rest is timed, and the rest are not", async () => {
    const c = clock();
    const told: string[] = [];
    const replay: SettleStage = {
      name: "idempotency",
      async run() {
        c.advance(2);
        return answer;
      },
    };
    await runStages(
      [replay, last(c, 900)],
      ctx,
      unreachable,
      (s, sec) => told.push(`${s}=${sec}`),
      c.now,
    );
    assert.deepEqual(told, ["idempotency=0.002"]);
  });

  test("a stage that throws, or whose later stages throw, is still timed", async () => {
    const c = clock();
    const told: string[] = [];
    const failing: SettleStage = {
      name: "mechanism",
      run() {
        c.advance(7);
        throw new Error("chain down");
      },
    };
    await assert.rejects(
      runStages(
        [wrapping("commit", c, 1, 0), failing],
        ctx,
        unreachable,
        (s, sec) => told.push(`${s}=${sec}`),
        c.now,
      ),
      /chain down/,
    );
    assert.deepEqual(told, ["mechanism=0.007", "commit=0.001"]);
  });

  test("a timer that throws changes no answer: the result and the error are the stages' own", async () => {
    const c = clock();
    const broken = () => {
      throw new TypeError("Value is not a valid number");
    };
    const r = await runStages(
      [wrapping("commit", c, 1, 1), last(c, 3)],
      ctx,
      unreachable,
      broken,
      c.now,
    );
    assert.deepEqual(r, answer);
    const failing: SettleStage = {
      name: "mechanism",
      run: () => Promise.reject(new Error("chain down")),
    };
    await assert.rejects(runStages([failing], ctx, unreachable, broken, c.now), /chain down/);
  });

  test("without a timer the stages run as before", async () => {
    const c = clock();
    const r = await runStages([wrapping("intent", c, 1, 1), last(c, 3)], ctx, unreachable);
    assert.deepEqual(r, answer);
    assert.equal(c.now(), 5);
  });
});
