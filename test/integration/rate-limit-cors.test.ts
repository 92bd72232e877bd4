/**
 * Rate limits per client IP and CORS for browser payers.
 * - Over the limit: 429, `Retry-After`, our JSON error envelope.
 * - `X-Forwarded-For` counts only when trustProxy is configured.
 * - With Redis (TEST_REDIS_URL), two replicas share one count.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Agent, fetch as undiciFetch } from "undici";
import { startStack, type TestStack } from "../support/stack.js";

/**
 * Requests from a loopback address of the test's own (127.0.0.N), so each
 * test has a budget of its own and passes alone or in any order.
 */
function client(localAddress: string) {
  const dispatcher = new Agent({ connect: { localAddress } });
  return {
    fetch: (url: string, init: Parameters<typeof undiciFetch>[1] = {}) =>
      undiciFetch(url, { ...init, dispatcher }),
    async hits(url: string, n: number, headers: Record<string, string> = {}) {
      const out = [];
      for (let i = 0; i < n; i++)
        out.push(await undiciFetch(`${url}/supported`, { headers, dispatcher }));
      return out;
    },
  };
}

describe("rate limits (in-process, no trusted proxy)", () => {
  let stack: TestStack;
  before(async () => {
    stack = await startStack({ env: { RATE_LIMIT_MAX: "5", RATE_LIMIT_WINDOW_MS: "60000" } });
  });
  after(() => stack.stop());

  test("the request over the limit gets 429 with Retry-After and a JSON error", async () => {
    const rs = await client("127.0.0.2").hits(stack.url, 6);
    assert.deepEqual(
      rs.map((r) => r.status),
      [200, 200, 200, 200, 200, 429],
    );
    const last = rs[5]!;
    assert.ok(Number(last.headers.get("retry-after")) > 0, "Retry-After in seconds");
    const body = (await last.json()) as { error: string; message: string; requestId: string };
    assert.equal(body.error, "rate_limited");
    assert.match(body.message, /at most 5/);
    assert.match(body.requestId, /^req_/);
  });

  test("X-Forwarded-For is ignored without trustProxy: a spoofed address does not get a new budget", async () => {
    const c = client("127.0.0.3");
    assert.equal((await c.hits(stack.url, 6)).at(-1)!.status, 429, "this address spent its budget");
    const r = await c.fetch(`${stack.url}/supported`, {
      headers: { "x-forwarded-for": "203.0.113.9" },
    });
    assert.equal(r.status, 429);
  });

  test("CORS: preflight allows the payment headers and exposes the payment response headers", async () => {
    const pre = await fetch(`${stack.url}/verify`, {
      method: "OPTIONS",
      headers: {
        origin: "https://shop.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type,x-api-key,payment-signature,x-payment",
      },
    });
    assert.ok(pre.status === 204 || pre.status === 200, `preflight status ${pre.status}`);
    const allowed = (pre.headers.get("access-control-allow-headers") ?? "").toLowerCase();
    for (const h of ["payment-signature", "x-payment", "x-api-key"])
      assert.ok(allowed.includes(h), `allows ${h}`);
  });
});

describe("rate limits behind a trusted proxy", () => {
  let stack: TestStack;
  before(async () => {
    stack = await startStack({
      env: { RATE_LIMIT_MAX: "3", RATE_LIMIT_WINDOW_MS: "60000", TRUST_PROXY: "true" },
    });
  });
  after(() => stack.stop());

  test("each forwarded client address has its own budget; CORS exposes payment headers on responses", async () => {
    const a = await client("127.0.0.1").hits(stack.url, 4, { "x-forwarded-for": "198.51.100.1" });
    const b = await client("127.0.0.1").hits(stack.url, 3, {
      "x-forwarded-for": "198.51.100.2",
      origin: "https://shop.example",
    });
    assert.deepEqual(
      a.map((r) => r.status),
      [200, 200, 200, 429],
    );
    assert.deepEqual(
      b.map((r) => r.status),
      [200, 200, 200],
    );
    const exposed = (b[0]!.headers.get("access-control-expose-headers") ?? "").toLowerCase();
    for (const h of ["payment-required", "payment-response", "x-payment-response"]) {
      assert.ok(exposed.includes(h), `exposes ${h}`);
    }
  });
});

const redisUrl = process.env["TEST_REDIS_URL"];
// On a laptop without Redis this part is left out; in CI a missing server fails the run.
if (!redisUrl && process.env["CI"]) {
  throw new Error("CI is set but TEST_REDIS_URL is not: start Redis (see .ci/run)");
}
if (redisUrl) {
  describe("rate limits shared through Redis", () => {
    let one: TestStack;
    let two: TestStack;
    before(async () => {
      const env = {
        RATE_LIMIT_MAX: "4",
        RATE_LIMIT_WINDOW_MS: "60000",
        REDIS_URL: redisUrl,
        TRUST_PROXY: "true",
      };
      one = await startStack({ env });
      two = await startStack({ env });
    });
    after(async () => {
      await one.stop();
      await two.stop();
    });

    test("two replicas share one budget per client address", async () => {
      const ip = `192.0.2.${Math.floor(Math.random() * 250) + 1}`;
      const headers = { "x-forwarded-for": ip };
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) {
        const target = i % 2 === 0 ? one.url : two.url;
        statuses.push((await fetch(`${target}/supported`, { headers })).status);
      }
      assert.deepEqual(statuses, [200, 200, 200, 200, 429, 429]);
    });
  });
}
