/**
 * Payer lanes across replicas: two processes' lanes share one Redis, so one
 * payer's settles never overlap, whichever replica each reaches.
 */
import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { PayerLanes } from "./payerLanes.js";

const redisUrl = process.env["TEST_REDIS_URL"];
if (!redisUrl && process.env["CI"]) {
  throw new Error("CI is set but TEST_REDIS_URL is not: start Redis (see .ci/run)");
}

describe(
  "payer lanes across replicas (Redis)",
  { skip: !redisUrl && "TEST_REDIS_URL not set" },
  () => {
    const clients: Redis[] = [];
    const replica = (maxWaitMs = 10_000) => {
      const redis = new Redis(redisUrl!, { maxRetriesPerRequest: 1 });
      clients.push(redis);
      return new PayerLanes({ maxWaiting: 16, maxWaitMs, leaseMs: 20_000, redis });
    };
    after(() => clients.forEach((c) => c.disconnect()));

    test("one payer's settles on two replicas never overlap, and all run", async () => {
      const [a, b] = [replica(), replica()];
      const key = `eip155:8453|0x${randomUUID().replaceAll("-", "")}`;
      let running = 0;
      let most = 0;
      let ran = 0;
      const settle = (lanes: PayerLanes) =>
        lanes.run(
          key,
          async () => {
            running += 1;
            most = Math.max(most, running);
            await new Promise((r) => setTimeout(r, 20));
            running -= 1;
            ran += 1;
            return "ran";
          },
          (why) => why,
        );
      const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => settle(i % 2 ? a : b)));
      assert.deepEqual(new Set(answers), new Set(["ran"]));
      assert.equal(ran, 8);
      assert.equal(most, 1, "never two of one payer's settles at once");
    });

    test("a replica waiting on another's hold past its deadline refuses, nothing run", async () => {
      const [a, b] = [replica(), replica(60)];
      const key = `eip155:8453|0x${randomUUID().replaceAll("-", "")}`;
      let release!: () => void;
      const held = a.run(
        key,
        () => new Promise<string>((r) => (release = () => r("held"))),
        String,
      );
      await new Promise((r) => setTimeout(r, 20));
      let ran = false;
      const refused = await b.run(
        key,
        async () => {
          ran = true;
          return "ran";
        },
        (why) => why,
      );
      assert.equal(refused, "waited_too_long");
      assert.equal(ran, false);
      release();
      assert.equal(await held, "held");
      assert.equal(await b.run(key, async () => "after", String), "after", "the hold was released");
    });
  },
);
