/**
 * The dashboard's JSON API without a browser: sessions and CSRF on every
 * /api/ route, accounts kept apart, keys, settlements (filters, search,
 * keyset pages, CSV), a paid plan that applies to the very next /settle,
 * webhooks, bad input, and the OpenAPI document covering every route.
 */
import { setAccountPlan, setAccountSuspended } from "../../src/features/plans/quotaLedger.js";
import { applyPayment } from "../../src/features/billing/billingLedger.js";
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { startStack, type TestStack } from "../support/stack.js";
import { availableBackends } from "../support/database.js";
import { signedInUser, type DashboardUser } from "../support/dashboardSession.js";
import { paymentRequest, requirementsFor, signPayment } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { accountForSignIn, claimAccount } from "../../src/features/identity/identities.js";
import { createAccount } from "../../src/features/accounts/accounts.js";

const PAY_TO = "0x000000000000000000000000000000000000dEaD";

async function json(res: Response): Promise<Record<string, unknown>> {
  return (await res.json()) as Record<string, unknown>;
}

for (const backend of availableBackends()) {
  describe(`dashboard API (${backend})`, () => {
    let stack: TestStack;
    let alice: DashboardUser;
    let bob: DashboardUser;

    before(async () => {
      stack = await startStack({
        backend,
        env: { METER_SETTLEMENTS: "true", WEBHOOK_ALLOW_PRIVATE_TARGETS: "false" },
      });
      alice = await signedInUser(stack.service.db, stack.url);
      bob = await signedInUser(stack.service.db, stack.url);
    });
    after(async () => stack?.stop());

    test("GET /openapi.json is OpenAPI 3.1 and lists every registered route", async () => {
      const res = await fetch(`${stack.url}/openapi.json`);
      assert.equal(res.status, 200);
      const doc = (await res.json()) as {
        openapi: string;
        paths: Record<string, Record<string, { security?: unknown[] }>>;
      };
      assert.equal(doc.openapi, "3.1.0");
      const missing: string[] = [];
      for (const route of stack.service.http.routeTable) {
        // The web app's files are not API, nor is the CORS preflight.
        if (route.url.startsWith("/dashboard") || route.method === "OPTIONS") continue;
        const path = route.url.replace(/:([A-Za-z0-9_]+)/g, "{$1}");
        const op = doc.paths[path]?.[route.method.toLowerCase()];
        if (!op) missing.push(`${route.method} ${route.url}`);
        else if (route.auth !== "none") assert.ok(op.security?.length, `${route.url} has security`);
      }
      assert.deepEqual(missing, []);
      assert.ok(doc.paths["/api/keys"]?.["post"], "dashboard routes are described");
      assert.ok(doc.paths["/settle"]?.["post"], "public routes are described");
    });

    test("every session route answers 401 without a session, in the error envelope", async () => {
      const routes = stack.service.http.routeTable.filter((r) => r.auth === "session");
      assert.ok(routes.length >= 15, `found ${routes.length} session routes`);
      for (const r of routes) {
        const url = r.url
          .replace(":id", r.url.includes("events") ? `evt_${"0".repeat(32)}` : randomUUID())
          .replace(":provider", "x");
        const res = await fetch(`${stack.url}${url}`, { method: r.method });
        assert.equal(res.status, 401, `${r.method} ${r.url}`);
        const body = await json(res);
        assert.equal(body["error"], "unauthorized");
        assert.equal(typeof body["requestId"], "string");
      }
      // A made-up or expired cookie is the same as none.
      const res = await fetch(`${stack.url}/api/keys`, {
        headers: { cookie: `__Host-x402-session=${"A".repeat(43)}` },
      });
      assert.equal(res.status, 401);
    });

    test("a state-changing call without the CSRF token, or from another origin, is refused and changes nothing", async () => {
      const before = await stack.service.db
        .selectFrom("api_keys")
        .select("id")
        .where("account_id", "=", alice.accountId)
        .execute();
      const noToken = await alice.call("/api/keys", {
        method: "POST",
        body: { name: "csrf" },
        csrf: false,
      });
      assert.equal(noToken.status, 403);
      assert.equal((await json(noToken))["error"], "forbidden");
      const wrongToken = await alice.call("/api/keys", {
        method: "POST",
        body: { name: "csrf" },
        csrf: false,
        headers: { "x-csrf-token": "x".repeat(43) },
      });
      assert.equal(wrongToken.status, 403);
      const foreign = await alice.call("/api/keys", {
        method: "POST",
        body: { name: "csrf" },
        headers: { origin: "https://evil.example" },
      });
      assert.equal(foreign.status, 403);
      const upgrade = await alice.call("/api/billing/checkout", {
        method: "POST",
        body: { plan: "max" },
        csrf: false,
      });
      assert.equal(upgrade.status, 403);
      const after = await stack.service.db
        .selectFrom("api_keys")
        .select("id")
        .where("account_id", "=", alice.accountId)
        .execute();
      assert.equal(after.length, before.length);
      const account = await stack.service.db
        .selectFrom("accounts")
        .select("plan")
        .where("id", "=", alice.accountId)
        .executeTakeFirstOrThrow();
      assert.equal(account.plan, "free");
    });

    test("bad input gets a 400 envelope naming the field, and changes nothing", async () => {
      for (const [path, method, body] of [
        ["/api/keys", "POST", { name: "" }],
        ["/api/keys", "POST", { name: "   " }],
        ["/api/billing/checkout", "POST", { plan: "gold" }],
        ["/api/billing/checkout", "POST", { plan: "free" }],
        ["/api/billing/plan-change", "POST", { plan: "max" }],
        ["/api/webhooks", "PUT", { url: "http://127.0.0.1:9/hook" }],
        ["/api/webhooks", "PUT", { url: "https://example.com/h", events: ["nope"] }],
        ["/api/settlements?limit=5000", "GET", undefined],
        ["/api/settlements?cursor=bm90LWEtY3Vyc29y", "GET", undefined],
        ["/api/settlements?status=lost", "GET", undefined],
        ["/api/metrics?range=1y", "GET", undefined],
      ] as const) {
        const res = await alice.call(path, { method, ...(body ? { body } : {}) });
        assert.equal(res.status, 400, `${method} ${path}`);
        const b = await json(res);
        assert.equal(b["error"], "invalid_request", `${method} ${path}`);
        assert.ok(String(b["message"]).length > 5);
      }
      const keys = await stack.service.db
        .selectFrom("api_keys")
        .select("id")
        .where("account_id", "=", alice.accountId)
        .execute();
      assert.equal(keys.length, 0);
      const hook = await stack.service.db
        .selectFrom("webhook_endpoints")
        .select("url")
        .where("account_id", "=", alice.accountId)
        .executeTakeFirst();
      assert.equal(hook, undefined);
    });

    test("keys: the full key once, masked after; a deleted key stops settling; other accounts get 404", async () => {
      const created = await alice.call("/api/keys", {
        method: "POST",
        body: { name: "production" },
      });
      assert.equal(created.status, 201);
      const key = await json(created);
      assert.match(String(key["key"]), /^[A-Za-z0-9_]+/);
      const list = (await json(await alice.call("/api/keys"))) as {
        keys: Record<string, unknown>[];
      };
      assert.equal(list.keys.length, 1);
      assert.equal(list.keys[0]!["name"], "production");
      assert.equal(list.keys[0]!["key"], undefined, "the full key is never listed");
      assert.ok(!JSON.stringify(list).includes(String(key["key"])));

      const bobList = (await json(await bob.call("/api/keys"))) as { keys: unknown[] };
      assert.equal(bobList.keys.length, 0);
      const bobDelete = await bob.call(`/api/keys/${String(key["id"])}`, { method: "DELETE" });
      assert.equal(bobDelete.status, 404);

      const requirements = requirementsFor({
        network: stack.network,
        usdc: stack.usdc,
        payTo: PAY_TO,
      });
      const payload = await signPayment(stack.payerKeys[0]!, requirements);
      const body = { x402Version: 2, paymentPayload: payload, paymentRequirements: requirements };
      const ok = await post(stack.url, "/settle", body, String(key["key"]));
      assert.equal(ok.status, 200);
      assert.equal((await json(ok))["success"], true);

      const del = await alice.call(`/api/keys/${String(key["id"])}`, { method: "DELETE" });
      assert.equal(del.status, 200);
      const row = await stack.service.db
        .selectFrom("api_keys")
        .select("revoked_at")
        .where("id", "=", String(key["id"]))
        .executeTakeFirstOrThrow();
      assert.ok(row.revoked_at, "revoked in the database");
      const payload2 = await signPayment(stack.payerKeys[0]!, requirements);
      const refused = await post(
        stack.url,
        "/settle",
        { ...body, paymentPayload: payload2 },
        String(key["key"]),
      );
      assert.equal(refused.status, 401);
    });

    test("keys: at most 20 live keys per account; the 21st is refused and nothing is created", async () => {
      const carol = await signedInUser(stack.service.db, stack.url);
      const liveKeys = async () =>
        (
          await stack.service.db
            .selectFrom("api_keys")
            .select("id")
            .where("account_id", "=", carol.accountId)
            .where("revoked_at", "is", null)
            .execute()
        ).map((r) => r.id);
      const create = (name: string) => carol.call("/api/keys", { method: "POST", body: { name } });
      for (let i = 0; i < 20; i++) assert.equal((await create(`key ${i}`)).status, 201);

      const refused = await create("one too many");
      assert.equal(refused.status, 409);
      const body = await json(refused);
      assert.equal(body["error"], "key_limit_reached");
      assert.match(String(body["message"]), /20/);
      assert.equal(body["key"], undefined);
      assert.equal((await liveKeys()).length, 20, "nothing created");
      const named = await stack.service.db
        .selectFrom("api_keys")
        .select("id")
        .where("account_id", "=", carol.accountId)
        .where("name", "=", "one too many")
        .execute();
      assert.deepEqual(named, []);

      // Deleted keys do not count; concurrent creations cannot overshoot.
      for (const id of (await liveKeys()).slice(0, 3)) {
        assert.equal((await carol.call(`/api/keys/${id}`, { method: "DELETE" })).status, 200);
      }
      const burst = await Promise.all(
        Array.from({ length: 8 }, (_, i) => create(`burst ${i}`).then((r) => r.status)),
      );
      assert.deepEqual(
        burst.filter((s) => s === 201).length,
        3,
        `three fit, the rest refused: ${burst.join(",")}`,
      );
      assert.ok(burst.every((s) => s === 201 || s === 409));
      assert.equal((await liveKeys()).length, 20);
    });

    test("settlements: filters, search, keyset pages over every row exactly once, CSV, and 404 across accounts", async () => {
      const db = stack.service.db;
      const keyA = await alice.call("/api/keys", { method: "POST", body: { name: "bulk" } });
      const keyId = String((await json(keyA))["id"]);
      const base = Date.parse("2026-01-10T12:00:00Z");
      const rows = Array.from({ length: 230 }, (_, i) => ({
        id: randomUUID(),
        account_id: alice.accountId,
        api_key_id: keyId,
        network: i % 2 ? "eip155:8453" : "eip155:10",
        scheme: "exact",
        payer: `0xpayer${String(i % 7).padStart(2, "0")}`,
        pay_to: PAY_TO,
        // Each network's mainnet USDC, so amounts read in token units.
        asset:
          i % 2
            ? "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
            : "0x0b2C639c533813f4Aa9D7837CAf62653d097Ff85",
        amount: String(10_000 + i),
        payload_fingerprint: `fp-${i}`,
        status: (i % 5 === 0 ? "failed" : "succeeded") as "failed" | "succeeded",
        transaction: `0x${i.toString(16).padStart(64, "0")}`,
        error_reason: i % 5 === 0 ? "insufficient_funds" : null,
        // Ten rows share each instant: the cursor must still not skip or repeat.
        started_at: new Date(base - Math.floor(i / 10) * 60_000),
      }));
      await db.insertInto("settlements").values(rows).execute();

      const seen = new Set<string>();
      let cursor: string | null = null;
      let pages = 0;
      do {
        const res = await alice.call(
          `/api/settlements?limit=37&from=2026-01-01T00:00:00Z&to=2026-01-11T00:00:00Z${cursor ? `&cursor=${cursor}` : ""}`,
        );
        assert.equal(res.status, 200);
        const page = (await res.json()) as {
          items: { id: string; startedAt: string }[];
          nextCursor: string | null;
        };
        for (const item of page.items) {
          assert.ok(!seen.has(item.id), "no row twice");
          seen.add(item.id);
        }
        cursor = page.nextCursor;
        pages++;
      } while (cursor && pages < 50);
      assert.equal(seen.size, 230);

      const failed = (await json(
        await alice.call(
          "/api/settlements?status=failed&limit=200&from=2026-01-01T00:00:00Z&to=2026-01-11T00:00:00Z",
        ),
      )) as {
        items: { status: string; reason: string; amountInUnits: string; apiKeyName: string }[];
      };
      assert.equal(failed.items.length, 46);
      assert.ok(
        failed.items.every((s) => s.status === "failed" && s.reason === "insufficient_funds"),
      );
      assert.equal(failed.items[0]!.apiKeyName, "bulk");
      assert.match(failed.items[0]!.amountInUnits, /^0\.01\d*$/, "USDC in token units");

      const search = (await json(
        await alice.call("/api/settlements?q=0XPAYER03&limit=200&network=eip155:10"),
      )) as { items: { payer: string; network: string }[] };
      assert.ok(search.items.length > 0);
      assert.ok(search.items.every((s) => s.payer === "0xpayer03" && s.network === "eip155:10"));
      const byTx = (await json(
        await alice.call(`/api/settlements?q=${rows[42]!.transaction}`),
      )) as { items: { id: string }[] };
      assert.deepEqual(
        byTx.items.map((s) => s.id),
        [rows[42]!.id],
      );

      const csv = await alice.call(
        "/api/settlements.csv?status=failed&from=2026-01-01T00:00:00Z&to=2026-01-11T00:00:00Z",
      );
      assert.equal(csv.status, 200);
      assert.match(csv.headers.get("content-type") ?? "", /text\/csv/);
      const lines = (await csv.text()).trim().split("\r\n");
      assert.equal(lines.length, 1 + 46);
      assert.match(lines[0]!, /^startedAt,status,reason,network/);

      const one = await alice.call(`/api/settlements/${rows[3]!.id}`);
      assert.equal(one.status, 200);
      assert.equal(
        ((await json(await bob.call(`/api/settlements/${rows[3]!.id}`))) as { error: string })
          .error,
        "not_found",
      );
      const bobList = (await json(
        await bob.call("/api/settlements?from=2026-01-01T00:00:00Z&to=2026-01-11T00:00:00Z"),
      )) as { items: unknown[] };
      assert.equal(bobList.items.length, 0);

      const overview = (await json(await alice.call("/api/overview"))) as {
        quota: { plan: string };
        latestFailures: unknown[];
      };
      assert.equal(overview.quota.plan, "free");
      const metrics = await alice.call("/api/metrics?range=30d");
      assert.equal(metrics.status, 200);
      const m = (await metrics.json()) as {
        buckets: string[];
        settlements: { succeeded: number[] };
      };
      assert.equal(m.buckets.length, 30);
      assert.equal(m.settlements.succeeded.length, 30);
    });

    test("on-chain failures: Overview shows each network's last hour against the plan's limit and when a held-off network resumes (as /settle's 429 says); Metrics shows the gas our signers spent per network", async () => {
      const db = stack.service.db;
      const dave = await signedInUser(db, stack.url);
      const eve = await signedInUser(db, stack.url);
      const created = await json(
        await dave.call("/api/keys", { method: "POST", body: { name: "gas" } }),
      );
      const keyId = String(created["id"]);
      const eveKey = String(
        (await json(await eve.call("/api/keys", { method: "POST", body: { name: "gas" } })))["id"],
      );
      const BASE = "eip155:8453";
      const OP = "eip155:10";
      const SOLANA = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp";
      const now = Date.now();
      const minutesAgo = (m: number) => new Date(now - m * 60_000);
      let n = 0;
      const settlement = (
        network: string,
        status: "failed" | "succeeded",
        finishedMinutesAgo: number,
        opts: { sent?: boolean; account?: string; apiKey?: string } = {},
      ) => {
        n++;
        return {
          id: randomUUID(),
          account_id: opts.account ?? dave.accountId,
          api_key_id: opts.apiKey ?? keyId,
          network,
          scheme: "exact",
          payer: "0xpayer",
          pay_to: PAY_TO,
          asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
          amount: "10000",
          payload_fingerprint: `gas-${randomUUID()}`,
          status,
          transaction: opts.sent === false ? null : `0x${n.toString(16).padStart(64, "a")}`,
          error_reason: status === "failed" ? "invalid_transaction_state" : null,
          started_at: new Date(now - finishedMinutesAgo * 60_000 - 1_000),
          finished_at: minutesAgo(finishedMinutesAgo),
        };
      };
      // Base: 20 failures on-chain in the last hour (1 to 20 minutes ago), the
      // free plan's limit; one more two hours ago and one that failed before
      // sending anything do not count.
      const baseFailed = Array.from({ length: 20 }, (_, i) => settlement(BASE, "failed", i + 1));
      const baseOld = settlement(BASE, "failed", 120);
      const baseUnsent = settlement(BASE, "failed", 5, { sent: false });
      const baseOk = settlement(BASE, "succeeded", 30);
      // OP: 3 failures on-chain, under the limit.
      const opFailed = Array.from({ length: 3 }, (_, i) => settlement(OP, "failed", 10 + i));
      // Solana: a success whose fee the chain did not report.
      const solanaOk = settlement(SOLANA, "succeeded", 15);
      // Outside the 30-day range, and another account's: neither is counted.
      const ancient = settlement(BASE, "succeeded", 40 * 24 * 60);
      const eves = settlement(BASE, "failed", 3, { account: eve.accountId, apiKey: eveKey });
      const rows = [
        ...baseFailed,
        baseOld,
        baseUnsent,
        baseOk,
        ...opFailed,
        solanaOk,
        ancient,
        eves,
      ];
      await db.insertInto("settlements").values(rows).execute();
      const transactions: {
        settlement: (typeof rows)[number];
        status: "sent" | "success" | "reverted";
        fee: string | null;
        suffix?: string;
      }[] = [
        ...[...baseFailed, baseOld].map((s) => ({
          settlement: s,
          status: "reverted" as const,
          fee: "42000000000000",
        })),
        // The success was a replacement: the first transaction was never mined.
        { settlement: baseOk, status: "sent", fee: null, suffix: "-replaced" },
        { settlement: baseOk, status: "success", fee: "60000000000000" },
        ...opFailed.map((s) => ({
          settlement: s,
          status: "reverted" as const,
          fee: "1000000000000",
        })),
        { settlement: solanaOk, status: "success", fee: null },
        { settlement: ancient, status: "success", fee: "999000000000000000" },
        { settlement: eves, status: "reverted", fee: "999000000000000000" },
      ];
      await db
        .insertInto("settlement_transactions")
        .values(
          transactions.map((t) => ({
            reference: `${t.settlement.transaction}${t.suffix ?? ""}`,
            settlement_id: t.settlement.id,
            network: t.settlement.network,
            signer: "0xsigner",
            replaces: null,
            detail: "{}",
            status: t.status,
          })),
        )
        .execute();
      for (const t of transactions.filter((t) => t.fee !== null)) {
        await db
          .updateTable("settlement_transactions")
          .set({ fee: t.fee })
          .where("reference", "=", `${t.settlement.transaction}${t.suffix ?? ""}`)
          .execute();
      }

      // Settles resume when the 20th most recent failure (20 minutes ago) is an hour old.
      const resumes = new Date(minutesAgo(20).getTime() + 3_600_000).toISOString();
      const overview = (await json(await dave.call("/api/overview"))) as {
        onChainFailures: unknown[];
      };
      assert.deepEqual(overview.onChainFailures, [
        { network: OP, lastHour: 3, limit: 20, heldOffUntil: null },
        { network: BASE, lastHour: 20, limit: 20, heldOffUntil: resumes },
      ]);
      const eveOverview = (await json(await eve.call("/api/overview"))) as {
        onChainFailures: unknown[];
      };
      assert.deepEqual(eveOverview.onChainFailures, [
        { network: BASE, lastHour: 1, limit: 20, heldOffUntil: null },
      ]);

      // /settle on Base says the same: 429 until then.
      const requirements = requirementsFor({
        network: stack.network,
        usdc: stack.usdc,
        payTo: PAY_TO,
      });
      assert.equal(stack.network, BASE);
      const refused = await post(
        stack.url,
        "/settle",
        paymentRequest(
          requirements,
          (await signPayment(stack.payerKeys[0]!, requirements)).payload,
        ),
        String(created["key"]),
      );
      assert.equal(refused.status, 429);
      assert.equal((await json(refused))["error"], "too_many_failed_settlements");
      const retryAfter = Number(refused.headers.get("retry-after"));
      const lifts = Date.now() + retryAfter * 1000;
      assert.ok(
        Math.abs(lifts - Date.parse(resumes)) <= 5_000,
        `Retry-After ${retryAfter} s ends near ${resumes}`,
      );

      const metrics = (await json(await dave.call("/api/metrics?range=30d"))) as {
        gasSpent: unknown[];
      };
      assert.deepEqual(metrics.gasSpent, [
        {
          network: OP,
          symbol: "ETH",
          transactions: 3,
          reverted: 3,
          fee: "3000000000000",
          feeInUnits: "0.000003",
        },
        {
          network: BASE,
          symbol: "ETH",
          // 21 reverted (20 in the last hour, one two hours ago), a replaced one and its success.
          transactions: 23,
          reverted: 21,
          fee: "942000000000000",
          feeInUnits: "0.000942",
        },
        {
          network: SOLANA,
          symbol: "SOL",
          transactions: 1,
          reverted: 0,
          fee: null,
          feeInUnits: null,
        },
      ]);

      // A paid plan's limit is higher: the same failures no longer hold Base off.
      // A paid plan (how it is paid is the billing suite's) raises the limit.
      await setAccountPlan(db, dave.accountId, "starter");
      const paid = (await json(await dave.call("/api/overview"))) as { onChainFailures: unknown[] };
      assert.deepEqual(paid.onChainFailures, [
        { network: OP, lastHour: 3, limit: 500, heldOffUntil: null },
        { network: BASE, lastHour: 20, limit: 500, heldOffUntil: null },
      ]);
    });

    test("at the quota limit, the checkout asks for a payment and the plan stays; once paid (here: applied as the checkout does), the very next /settle goes through", async () => {
      const created = await json(
        await alice.call("/api/keys", { method: "POST", body: { name: "quota" } }),
      );
      const apiKey = String(created["key"]);
      // Fill the free plan's month.
      const month = new Date().toISOString().slice(0, 7);
      await stack.service.db
        .insertInto("quota_usage")
        .values({ account_id: alice.accountId, month, used: 10 })
        .onConflict((oc) => oc.columns(["account_id", "month"]).doUpdateSet({ used: 10 }))
        .execute();
      const requirements = requirementsFor({
        network: stack.network,
        usdc: stack.usdc,
        payTo: PAY_TO,
      });
      const settle = async () =>
        post(
          stack.url,
          "/settle",
          paymentRequest(
            requirements,
            (await signPayment(stack.payerKeys[1]!, requirements)).payload,
          ),
          apiKey,
        );
      const refused = await settle();
      assert.equal(refused.status, 402);
      const refusal = await json(refused);
      assert.equal(refusal["error"], "quota_exceeded");
      assert.equal(refusal["upgrade"], "/api/billing/upgrade");

      const unpaid = await alice.call("/api/billing/checkout", {
        method: "POST",
        body: { plan: "starter" },
      });
      assert.equal(unpaid.status, 402);
      assert.ok(unpaid.headers.get("payment-required"), "an x402 offer");
      assert.equal(((await json(unpaid))["purchase"] as { priceUsd: string }).priceUsd, "5.00");
      const still = await stack.service.db
        .selectFrom("accounts")
        .select("plan")
        .where("id", "=", alice.accountId)
        .executeTakeFirstOrThrow();
      assert.equal(still.plan, "free", "no payment, no plan");

      // The payment itself is the billing suite's (test/integration/billing.test.ts);
      // what it applies is what the plan reads.
      const at = new Date();
      const id = randomUUID();
      await stack.service.db
        .insertInto("billing_payments")
        .values({
          id,
          account_id: alice.accountId,
          kind: "plan",
          plan: "starter",
          amount_micro_usd: 5_000_000,
          status: "pending",
          source: "dashboard",
          authorization_key: `test:${id}`,
        })
        .execute();
      await applyPayment(
        stack.service.db,
        id,
        { transaction: "0xabc", payer: null },
        { paygGraceMicroUsd: 0 },
        at,
      );
      const plan = await json(await alice.call("/api/plans"));
      assert.equal(plan["plan"], "starter");
      assert.equal(plan["paidUntil"], new Date(at.getTime() + 30 * 86_400_000).toISOString());
      const ok = await settle();
      assert.equal(ok.status, 200);
      assert.equal((await json(ok))["success"], true);
    });

    test("a suspended account reads the operator's reason in Plans; resumed, it is gone", async () => {
      await setAccountSuspended(
        stack.service.db,
        bob.accountId,
        true,
        "invoice 2026-10 is 30 days overdue",
      );
      const suspended = await json(await bob.call("/api/plans"));
      assert.equal(suspended["suspended"], true);
      assert.match(String(suspended["suspendedReason"]), /^invoice 2026-10 is 30 days overdue/);
      assert.match(String(suspended["suspendedReason"]), /402 account_suspended/);
      await setAccountSuspended(stack.service.db, bob.accountId, false);
      const resumed = await json(await bob.call("/api/plans"));
      assert.equal(resumed["suspended"], false);
      assert.equal(resumed["suspendedReason"], null);
      const row = await stack.service.db
        .selectFrom("accounts")
        .select(["suspended_at", "suspended_reason"])
        .where("id", "=", bob.accountId)
        .executeTakeFirstOrThrow();
      assert.deepEqual(row, { suspended_at: null, suspended_reason: null });
    });

    test("webhooks: set (secret once), rotate, test delivery queued, other accounts get 404", async () => {
      // Private targets are refused here (WEBHOOK_ALLOW_PRIVATE_TARGETS=false), so a public name is used; nothing is delivered to it in this test.
      const set = await alice.call("/api/webhooks", {
        method: "PUT",
        body: { url: "https://93.184.215.14/hooks", events: ["settlement.failed"] },
      });
      assert.equal(set.status, 200);
      const first = await json(set);
      assert.match(String(first["secret"]), /^whsec_/);
      const again = await json(
        await alice.call("/api/webhooks", {
          method: "PUT",
          body: { url: "https://93.184.215.14/other" },
        }),
      );
      assert.equal(again["secret"], null, "an existing endpoint keeps its secret");
      const shown = (await json(await alice.call("/api/webhooks"))) as {
        endpoint: { secretHint: string };
      };
      assert.ok(!JSON.stringify(shown).includes(String(first["secret"])));
      const rotated = await json(await alice.call("/api/webhooks/secret", { method: "POST" }));
      assert.notEqual(rotated["secret"], first["secret"]);
      const stored = await stack.service.db
        .selectFrom("webhook_endpoints")
        .select("secret")
        .where("account_id", "=", alice.accountId)
        .executeTakeFirstOrThrow();
      assert.equal(stored.secret, rotated["secret"]);

      const test = await alice.call("/api/webhooks/test", { method: "POST" });
      assert.equal(test.status, 202);
      const eventId = String((await json(test))["eventId"]);
      const event = await stack.service.db
        .selectFrom("webhook_events")
        .select(["type", "account_id"])
        .where("id", "=", eventId)
        .executeTakeFirstOrThrow();
      assert.equal(event.type, "webhook.test");
      assert.equal(event.account_id, alice.accountId);

      const bobResend = await bob.call(`/api/webhooks/events/${eventId}/resend`, {
        method: "POST",
      });
      assert.equal(bobResend.status, 404);
      const bobEvents = (await json(await bob.call("/api/webhooks/events"))) as {
        events: unknown[];
      };
      assert.equal(bobEvents.events.length, 0);
      assert.equal((await bob.call("/api/webhooks/test", { method: "POST" })).status, 404);
    });

    test("sign-out deletes the session row, and its cookie no longer works", async () => {
      const carol = await signedInUser(stack.service.db, stack.url);
      assert.equal((await carol.call("/api/session")).status, 200);
      const out = await carol.call("/auth/signout", { method: "POST" });
      assert.equal(out.status, 200);
      assert.match(out.headers.get("set-cookie") ?? "", /__Host-x402-session=;/);
      const row = await stack.service.db
        .selectFrom("dashboard_sessions")
        .select("id")
        .where("id", "=", carol.sessionId)
        .executeTakeFirst();
      assert.equal(row, undefined);
      assert.equal((await carol.call("/api/session")).status, 401);
    });

    test("first sign-in creates a free account; the next finds it; an operator claim binds a CLI account", async () => {
      const db = stack.service.db;
      const identity = {
        issuer: "https://id.example",
        subject: randomUUID(),
        provider: "example",
        email: "dev@example.test",
        name: "Dev",
      };
      const first = await accountForSignIn(db, identity);
      assert.equal(first.created, true);
      assert.equal(first.account.plan, "free");
      const second = await accountForSignIn(db, identity);
      assert.equal(second.created, false);
      assert.equal(second.account.id, first.account.id);

      const cli = await createAccount(db, "made-by-cli");
      const claimed = await claimAccount(db, cli.id, {
        issuer: "https://id.example",
        subject: "ops-1",
        provider: "example",
      });
      assert.equal(claimed.kind, "bound");
      const signIn = await accountForSignIn(db, { ...identity, subject: "ops-1" });
      assert.equal(signIn.account.id, cli.id);
      const moved = await claimAccount(db, cli.id, {
        issuer: identity.issuer,
        subject: identity.subject,
        provider: "example",
      });
      assert.deepEqual(moved, { kind: "already_bound", accountId: first.account.id });
    });

    test("a provider that names an account to join (the devnet's): first sign-ins join it, others keep their own", async () => {
      const db = stack.service.db;
      const name = `joined-${randomUUID()}`;
      const person = (subject: string) => ({
        issuer: "https://local.example",
        subject,
        provider: "local",
        email: `${subject}@local.example`,
        name: subject,
      });
      // None of that name yet: the first sign-in makes it, the next joins it.
      const alice = await accountForSignIn(db, person(randomUUID()), { joinAccount: name });
      assert.equal(alice.account.name, name);
      assert.equal(alice.created, true);
      const bob = await accountForSignIn(db, person(randomUUID()), { joinAccount: name });
      assert.deepEqual([bob.account.id, bob.created], [alice.account.id, false]);
      // The oldest of the name is the one joined.
      await createAccount(db, name);
      const carol = await accountForSignIn(db, person(randomUUID()), { joinAccount: name });
      assert.equal(carol.account.id, alice.account.id);
      // Without it (production's providers), an account of one's own.
      const dave = await accountForSignIn(db, person(randomUUID()));
      assert.notEqual(dave.account.id, alice.account.id);
      assert.equal(dave.created, true);
    });
  });
}
