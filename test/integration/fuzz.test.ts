/**
 * Fuzzing the payment endpoints: 1,200 random and mutated bodies (and raw
 * byte strings) must never produce a 5xx or take the service down, and must
 * never move money or write a settlement for an unauthenticated caller.
 *
 * The generator is seeded, so a failure is reproducible from the printed seed.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startStack, type TestStack } from "../support/stack.js";
import { requirementsFor, signPayment } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { fuzzSeed, seededRandom } from "../support/seededRandom.js";

const WEIRD: unknown[] = [
  "\ud800",
  "ok\udfff",
  null,
  true,
  0,
  -1,
  2 ** 53,
  1e308,
  "",
  "0x",
  "0x" + "f".repeat(64),
  "eip155:8453",
  "💸".repeat(20),
  "\u0000",
  [],
  {},
  { __proto__: { polluted: true } },
  { constructor: { prototype: { x: 1 } } },
  "9".repeat(100),
  [1, [2, [3, [4]]]],
];

function mutate(value: unknown, r: () => number, depth = 0): unknown {
  const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)]!;
  if (depth > 6) return pick(WEIRD);
  if (Array.isArray(value)) return value.map((v) => (r() < 0.3 ? mutate(v, r, depth + 1) : v));
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      const roll = r();
      if (roll < 0.08) continue; // drop the field
      if (roll < 0.25) out[k] = pick(WEIRD);
      else if (roll < 0.45) out[k] = mutate(v, r, depth + 1);
      else out[k] = v;
    }
    if (r() < 0.1) out[pick(["extra", "x402Version", "__proto__", "payload", "zzz"])] = pick(WEIRD);
    return out;
  }
  if (typeof value === "string" && r() < 0.5) {
    const i = Math.floor(r() * (value.length + 1));
    return value.slice(0, i) + pick(["", "0", "z", "ff", "-", "\n"]) + value.slice(i + 1);
  }
  return r() < 0.5 ? pick(WEIRD) : value;
}

function randomBytesString(r: () => number): string {
  const n = Math.floor(r() * 300);
  let s = "";
  for (let i = 0; i < n; i++) s += String.fromCharCode(Math.floor(r() * 256));
  return s;
}

describe("fuzzing /verify and /settle", () => {
  let stack: TestStack;
  let good: Record<string, unknown>;
  // A fixed seed keeps CI deterministic; set FUZZ_SEED to explore others.
  const seed = fuzzSeed("payment endpoints", 20261122);

  before(async () => {
    stack = await startStack();
    const requirements = requirementsFor({
      network: stack.network,
      usdc: stack.usdc,
      payTo: "0x5555555555555555555555555555555555555555",
    });
    good = {
      x402Version: 2,
      paymentPayload: await signPayment(stack.payerKeys[0]!, requirements),
      paymentRequirements: requirements,
    };
  });
  after(() => stack.stop());

  test("poison that would verify but could never be stored: a clear 400 on both routes, nothing recorded", async () => {
    // Built as text: the point is a body too deep for recursive code (arrays
    // keep 12,000 levels inside the body size limit).
    const deep = (n: number) => "[".repeat(n) + "]".repeat(n);
    const payload = good["paymentPayload"] as Record<string, unknown>;
    const cases: { name: string; body: string; field: RegExp }[] = [
      {
        name: "NUL in extensions",
        body: JSON.stringify({
          ...good,
          paymentPayload: { ...payload, extensions: { note: "a\u0000b" } },
        }),
        field: /paymentPayload\.extensions\.note .*NUL/,
      },
      {
        name: "lone surrogate in resource.description",
        body: JSON.stringify({
          ...good,
          paymentPayload: {
            ...payload,
            resource: { url: "http://127.0.0.1/r", description: "x\ud800" },
          },
        }),
        field: /paymentPayload\.resource\.description .*surrogate/,
      },
      ...[5_000, 12_000].map((n) => ({
        name: `extensions nested ${n} deep`,
        body: JSON.stringify({
          ...good,
          paymentPayload: { ...payload, extensions: { deep: "@" } },
        }).replace('"@"', deep(n)),
        field: /deeper than/,
      })),
    ];
    const before = await stack.service.db.selectFrom("settlements").select("id").execute();
    for (const c of cases) {
      for (const path of ["/verify", "/settle"]) {
        const res = await post(stack.url, path, c.body, stack.apiKey);
        const json = (await res.json()) as { error: string; message: string };
        assert.equal(
          res.status,
          400,
          `${c.name} on ${path}: ${JSON.stringify(json).slice(0, 300)}`,
        );
        assert.equal(json.error, "invalid_request");
        assert.match(json.message, c.field, c.name);
      }
    }
    const afterRows = await stack.service.db.selectFrom("settlements").select("id").execute();
    assert.equal(afterRows.length, before.length, "nothing recorded");
  });

  test(`1,200 random and mutated bodies: no 5xx, no crash (seed ${seed})`, async () => {
    const r = seededRandom(seed);
    const statuses = new Map<number, number>();
    const CONCURRENCY = 16;
    const TOTAL = 1200;
    let sent = 0;
    const worker = async () => {
      while (sent < TOTAL) {
        const i = sent++;
        const path = r() < 0.5 ? "/verify" : "/settle";
        const kind = r();
        let body: string;
        if (kind < 0.1) body = randomBytesString(r);
        else if (kind < 0.2)
          body = JSON.stringify(mutate(WEIRD[Math.floor(r() * WEIRD.length)], r));
        else body = JSON.stringify(mutate(good, r));
        // Authenticated most of the time, so mutations reach the handlers.
        const key = r() < 0.9 ? stack.apiKey : undefined;
        const res = await post(stack.url, path, body, key);
        const text = await res.text();
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        assert.ok(
          res.status < 500,
          `request ${i} to ${path} got ${res.status}: ${text.slice(0, 300)}\nbody: ${body.slice(0, 500)}`,
        );
        assert.doesNotThrow(() => JSON.parse(text), `request ${i} answered non-JSON`);
        assert.doesNotMatch(text, /\n\s+at /, "no stack trace");
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    const total = [...statuses.values()].reduce((a, b) => a + b, 0);
    assert.equal(total, TOTAL);
    // The service is still up and still serving.
    const res = await fetch(`${stack.url}/supported`);
    assert.equal(res.status, 200);
    // Only well-formed, authenticated settles can leave a row, and only the
    // untouched payment could have moved money (at most once).
    const succeeded = await stack.service.db
      .selectFrom("settlements")
      .selectAll()
      .where("status", "=", "succeeded")
      .execute();
    assert.ok(
      succeeded.length <= 1,
      `at most one success for one signed authorization, got ${succeeded.length}`,
    );
  });
});
