import { test } from "node:test";
import assert from "node:assert/strict";
import { ConfidentialStatusSource, offersFor, type ConfidentialStatus } from "./offers.js";

const status: ConfidentialStatus = {
  available: true,
  network: "eip155:8453",
  contractAddress: "0x00000000000000000000000000000000c0ffee01",
  configured: true,
  mode: "both",
  enabled: true,
  merchantAddress: "0x1111111111111111111111111111111111111111",
};
const plain = {
  scheme: "exact",
  network: "eip155:8453" as const,
  payTo: "0x2222222222222222222222222222222222222222",
  price: "$0.01",
};

test("both mode lists the confidential offer first, then the plain one", () => {
  const offers = offersFor(status, plain);
  assert.equal(offers.length, 2);
  assert.equal(offers[0]!.payTo, status.contractAddress);
  assert.deepEqual(offers[0]!.extra, {
    confidential: true,
    merchant: status.merchantAddress,
    assetTransferMethod: "eip3009",
  });
  assert.equal(offers[0]!.price, "$0.01", "the payer pays the advertised price");
  assert.deepEqual(offers[1], plain);
});

test("confidential mode offers only the private variant; default only the plain one", () => {
  assert.deepEqual(
    offersFor({ ...status, mode: "confidential" }, plain).map((o) => o.payTo),
    [status.contractAddress],
  );
  assert.deepEqual(offersFor({ ...status, mode: "default" }, plain), [plain]);
});

test("until enabled, or where unavailable, only the plain offer is made", () => {
  assert.deepEqual(offersFor({ ...status, enabled: false }, plain), [plain]);
  assert.deepEqual(offersFor({ ...status, available: false }, plain), [plain]);
});

/** A fetch that answers from `answers` in turn and records what it was asked. */
function fakeFetch(answers: (() => Response)[]) {
  const calls: { url: string; headers: Headers }[] = [];
  const fetch = (async (url: string | URL | Request, init?: RequestInit) => {
    calls.push({ url: String(url), headers: new Headers(init?.headers) });
    const next = answers.shift();
    if (!next) throw new Error("no more answers");
    return next();
  }) as typeof globalThis.fetch;
  return { fetch, calls };
}

test("the status source reads GET /confidential/status with the API key, once per TTL", async () => {
  const { fetch, calls } = fakeFetch([() => Response.json(status)]);
  const source = new ConfidentialStatusSource({
    facilitatorUrl: "http://facilitator.test/",
    apiKey: "x402_sk_test",
    ttlMs: 60_000,
    fetch,
  });
  // Concurrent first reads share one request; later reads within the TTL reuse its answer.
  const [a, b] = await Promise.all([source.status(), source.status()]);
  assert.deepEqual(a, status);
  assert.deepEqual(b, status);
  assert.deepEqual(await source.status(), status);
  assert.equal(calls.length, 1);
  assert.equal(calls[0]!.url, "http://facilitator.test/confidential/status");
  assert.equal(calls[0]!.headers.get("x-api-key"), "x402_sk_test");
});

test("the status source keeps its last answer when a later read fails, and throws when it has none", async () => {
  const { fetch, calls } = fakeFetch([
    () => Response.json(status),
    () => new Response("down", { status: 503 }),
    () => Response.json({ ...status, mode: "confidential" }),
  ]);
  const source = new ConfidentialStatusSource({
    facilitatorUrl: "http://facilitator.test",
    apiKey: "k",
    ttlMs: 0,
    fetch,
  });
  assert.equal((await source.status()).mode, "both");
  assert.equal((await source.status()).mode, "both", "a failed read keeps the last answer");
  assert.equal(
    (await source.status()).mode,
    "confidential",
    "a mode changed in the dashboard arrives",
  );
  assert.equal(calls.length, 3);

  const failing = new ConfidentialStatusSource({
    facilitatorUrl: "http://facilitator.test",
    apiKey: "k",
    fetch: fakeFetch([() => new Response("unknown API key", { status: 401 })]).fetch,
  });
  await assert.rejects(failing.status(), /answered 401: unknown API key/);
});
