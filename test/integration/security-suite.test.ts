/**
 * One security suite over every authenticated route, read from the service's
 * own route table (so a new route cannot be forgotten): no key, a wrong key
 * and a deleted key each get 401 with the JSON envelope and change nothing;
 * an exhausted quota refuses /settle with 402 and body 2.8, and leaves every
 * other authenticated route working (the upgrade path offers its payment).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startStack, type TestStack } from "../support/stack.js";
import { requirementsFor, signPayment } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey, deleteApiKey } from "../../src/features/keys/apiKeys.js";
import { monthOf } from "../../src/features/plans/plans.js";

describe("security suite over every authenticated route", () => {
  let stack: TestStack;
  let body: unknown;

  before(async () => {
    stack = await startStack({ env: { METER_SETTLEMENTS: "true" } });
    const requirements = requirementsFor({
      network: stack.network,
      usdc: stack.usdc,
      payTo: "0x4141414141414141414141414141414141414141",
    });
    body = {
      x402Version: 2,
      paymentPayload: await signPayment(stack.payerKeys[0]!, requirements),
      paymentRequirements: requirements,
    };
  });
  after(() => stack.stop());

  const routes = () => stack.service.http.routeTable.filter((r) => r.auth === "apiKey");
  /** The upgrade path is sold: an order, not a payment body. */
  const isUpgrade = (route: { method: string; url: string }) =>
    route.method === "POST" && route.url === "/api/billing/upgrade";
  const call = (route: { method: string; url: string }, key?: string) =>
    route.method === "POST"
      ? post(stack.url, route.url, isUpgrade(route) ? { plan: "starter" } : body, key)
      : fetch(`${stack.url}${route.url}`, { headers: key ? { "x-api-key": key } : {} });
  const settlements = async () =>
    (await stack.service.db.selectFrom("settlements").select("id").execute()).length;

  test("the route table names the paid and account routes as authenticated", () => {
    const names = routes().map((r) => `${r.method} ${r.url}`);
    for (const expected of [
      "POST /verify",
      "POST /settle",
      "GET /api/billing/upgrade",
      "POST /api/billing/upgrade",
      "GET /api/billing/plans",
    ]) {
      assert.ok(names.includes(expected), `${expected} in ${names.join(", ")}`);
    }
    const open = stack.service.http.routeTable.filter((r) => r.auth === "none").map((r) => r.url);
    for (const url of open) assert.ok(!url.startsWith("/api/"), `${url} is under /api/ but open`);
  });

  test("no key, a wrong key and a deleted key: 401 with the envelope, nothing recorded", async () => {
    const account = await createAccount(stack.service.db, "security");
    const doomed = await createApiKey(stack.service.db, account.id, "doomed");
    assert.equal(await deleteApiKey(stack.service.db, doomed.id), true);
    const before = await settlements();
    for (const route of routes()) {
      for (const [what, key] of [
        ["no key", undefined],
        ["wrong key", "x402_live_not_a_real_key_0000000000000000"],
        ["deleted key", doomed.key],
      ] as const) {
        const res = await call(route, key);
        const json = (await res.json()) as Record<string, unknown>;
        assert.equal(res.status, 401, `${what} on ${route.method} ${route.url}`);
        assert.equal(json["error"], "unauthorized");
        assert.equal(typeof json["message"], "string");
        assert.match(String(json["requestId"]), /^req_/);
        assert.doesNotMatch(JSON.stringify(json), /\n\s+at /, "no stack");
      }
    }
    assert.equal(await settlements(), before, "nothing recorded for a refused caller");
  });

  test("an exhausted quota: /settle is 402 with body 2.8; every other route still serves", async () => {
    const account = await createAccount(stack.service.db, "exhausted");
    const key = await createApiKey(stack.service.db, account.id, "exhausted");
    await stack.service.db
      .insertInto("quota_usage")
      .values({ account_id: account.id, month: monthOf(new Date()), used: 10 })
      .execute();
    for (const route of routes()) {
      const res = await call(route, key.key);
      const json = (await res.json()) as Record<string, unknown>;
      if (route.method === "POST" && route.url === "/settle") {
        assert.equal(res.status, 402);
        assert.deepEqual(
          [json["error"], json["plan"], json["limit"], json["usedThisMonth"], json["upgrade"]],
          ["quota_exceeded", "free", 10, 10, "/api/billing/upgrade"],
        );
      } else if (isUpgrade(route)) {
        // Where the 402 points: it asks for the payment that lifts the limit.
        assert.equal(res.status, 402, JSON.stringify(json));
        assert.equal(json["error"], "payment_required");
        assert.ok(res.headers.get("payment-required"), "PAYMENT-REQUIRED offered");
      } else {
        assert.equal(res.status, 200, `${route.method} ${route.url}: ${JSON.stringify(json)}`);
      }
    }
    const rows = await stack.service.db
      .selectFrom("settlements")
      .select("id")
      .where("account_id", "=", account.id)
      .execute();
    assert.equal(rows.length, 0, "a refused settle leaves no record");
  });
});
