/**
 * Plans, quotas and idempotent settle (spec 2.8, 3.1, 3.2, 7, 8) on a real
 * chain and database: 402 with body 2.8 when the month's quota is used up
 * (reserved before the settle, so parallel settles never overshoot), 409 for
 * a reused payment-identifier, 400 for a malformed one, and replays that
 * move no money and use no quota.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { startStack, type TestStack } from "../support/stack.js";
import { requirementsFor, signPayment, usdcBalance } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { nowSeconds, signAuthorization } from "../chains/evm/authorization.js";
import { availableBackends } from "../support/database.js";
import { createService, type Service } from "../../src/app.js";
import { loadConfig } from "../../src/config/index.js";
import { openMigratedDb, type OpenedDb } from "../../src/storage/db.js";
import { sql } from "kysely";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { monthOf } from "../../src/features/plans/plans.js";
import { setAccountPlan, setAccountSuspended } from "../../src/features/plans/quotaLedger.js";

const PAY_TO = "0x4444444444444444444444444444444444444444" as Hex;
const AMOUNT = 1000n;

function withId(payload: PaymentPayload, id: string | undefined, required = false): PaymentPayload {
  return {
    ...payload,
    extensions: { "payment-identifier": { info: { required, ...(id ? { id } : {}) } } },
  } as PaymentPayload;
}

for (const backend of availableBackends()) {
  describe(`plans, quotas and payment-identifier (${backend})`, () => {
    let stack: TestStack;
    before(async () => {
      stack = await startStack({ backend, payers: 6, env: { METER_SETTLEMENTS: "true" } });
    });
    after(() => stack.stop());

    const reqs = (): PaymentRequirements =>
      requirementsFor({
        network: stack.network,
        usdc: stack.usdc,
        payTo: PAY_TO,
        amount: String(AMOUNT),
      });
    const body = async (payerKey: Hex, id?: string) => {
      const requirements = reqs();
      const payload = await signPayment(payerKey, requirements);
      return {
        x402Version: 2,
        paymentPayload: id ? withId(payload, id) : payload,
        paymentRequirements: requirements,
      };
    };
    /** A fresh account with its own key, so each test has its own quota. */
    const freshAccount = async (name: string, plan = "free", used = 0) => {
      const account = await createAccount(stack.service.db, name);
      if (plan !== "free") await setAccountPlan(stack.service.db, account.id, plan as "pro");
      if (used > 0) {
        await stack.service.db
          .insertInto("quota_usage")
          .values({ account_id: account.id, month: monthOf(new Date()), used })
          .execute();
      }
      const key = await createApiKey(stack.service.db, account.id, name);
      return { accountId: account.id, apiKey: key.key, keyId: key.id };
    };
    const usage = async (accountId: string) =>
      stack.service.db
        .selectFrom("quota_usage")
        .select(["used", "reserved"])
        .where("account_id", "=", accountId)
        .where("month", "=", monthOf(new Date()))
        .executeTakeFirst();
    const settlementsOf = (accountId: string) =>
      stack.service.db
        .selectFrom("settlements")
        .selectAll()
        .where("account_id", "=", accountId)
        .execute();
    const paidTo = () => usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO);
    /**
     * A second service on the same database and chain, as a second replica
     * would be: its own PaymentService state and, on PostgreSQL, its own
     * connection pool. (PGlite is one in-process database: it is shared.)
     */
    const startReplica = async (): Promise<Service> => {
      const info = stack.devnet.networks[stack.network]!;
      let database: OpenedDb = {
        db: stack.service.db,
        kind: stack.service.dbKind,
        close: async () => {},
      };
      if (stack.service.dbKind === "postgres") {
        const { rows } = await sql<{ name: string }>`select current_database() as name`.execute(
          stack.service.db,
        );
        const url = new URL(process.env["TEST_DATABASE_URL"]!);
        url.pathname = `/${rows[0]!.name}`;
        database = await openMigratedDb({ databaseUrl: url.toString(), poolSize: 10 });
      }
      const service = await createService({
        overrides: { collectProcessMetrics: false, pollingIntervalMs: 50, reconcile: false },
        config: loadConfig({
          FACILITATOR_MODE: "devnet",
          PORT: "0",
          HOST: "127.0.0.1",
          LOG_LEVEL: "silent",
          SETTLE_TIMEOUT_MS: "20000",
          METER_SETTLEMENTS: "true",
        }),
        database,
        chains: {
          eip155: {
            networks: [{ id: stack.network, rpcUrls: [info.rpcUrl] }],
            privateKeys: info.facilitatorPrivateKeys as Hex[],
          },
        },
      });
      return {
        ...service,
        async close() {
          await service.close();
          await database.close();
        },
      };
    };

    test("GET /supported advertises payment-identifier", async () => {
      const res = (await (await fetch(`${stack.url}/supported`)).json()) as {
        extensions: string[];
      };
      assert.ok(res.extensions.includes("payment-identifier"), String(res.extensions));
      assert.ok(res.extensions.includes("bazaar"));
    });

    test("3.1 settled: HTTP 200, recorded, counts one unit of quota", async () => {
      const acc = await freshAccount("count-success");
      const before = await paidTo();
      const res = await post(stack.url, "/settle", await body(stack.payerKeys[0]!), acc.apiKey);
      assert.equal(res.status, 200);
      const out = (await res.json()) as { success: boolean };
      assert.equal(out.success, true);
      assert.equal(await paidTo(), before + AMOUNT);
      assert.deepEqual(await usage(acc.accountId), { used: 1, reserved: 0 });
      const rows = await settlementsOf(acc.accountId);
      assert.deepEqual(
        rows.map((r) => r.status),
        ["succeeded"],
      );
    });

    test("3.1 failed: HTTP 200 success:false, recorded, uses no quota", async () => {
      const acc = await freshAccount("count-failure");
      const requirements = reqs();
      const payload = await signAuthorization(stack.payerKeys[1]!, requirements, {
        to: PAY_TO,
        value: AMOUNT,
        validAfter: 0n,
        validBefore: nowSeconds() - 10n,
      });
      const res = await post(
        stack.url,
        "/settle",
        { x402Version: 2, paymentPayload: payload, paymentRequirements: requirements },
        acc.apiKey,
      );
      assert.equal(res.status, 200);
      const out = (await res.json()) as { success: boolean; transaction: string };
      assert.equal(out.success, false);
      assert.equal(out.transaction, "");
      assert.deepEqual(await usage(acc.accountId), { used: 0, reserved: 0 });
      assert.deepEqual(
        (await settlementsOf(acc.accountId)).map((r) => r.status),
        ["failed"],
      );
    });

    test("402 quota exhausted: exactly body 2.8; /verify keeps working; an upgrade applies at once", async () => {
      const acc = await freshAccount("exhausted", "free", 10);
      const before = await paidTo();
      const payment = await body(stack.payerKeys[2]!);
      const res = await post(stack.url, "/settle", payment, acc.apiKey);
      assert.equal(res.status, 402);
      const out = (await res.json()) as Record<string, unknown>;
      assert.deepEqual(Object.keys(out).sort(), [
        "error",
        "limit",
        "message",
        "plan",
        "requestId",
        "upgrade",
        "usedThisMonth",
      ]);
      assert.equal(out["error"], "quota_exceeded");
      assert.equal(out["plan"], "free");
      assert.equal(out["limit"], 10);
      assert.equal(out["usedThisMonth"], 10);
      assert.equal(out["upgrade"], "/api/billing/upgrade");
      assert.equal(await paidTo(), before, "nothing moved");
      assert.equal((await settlementsOf(acc.accountId)).length, 0, "nothing was attempted");

      const verify = await post(stack.url, "/verify", payment, acc.apiKey);
      assert.equal(verify.status, 200);
      assert.equal(((await verify.json()) as { isValid: boolean }).isValid, true);
      assert.deepEqual(await usage(acc.accountId), { used: 10, reserved: 0 }, "verify is free");

      await setAccountPlan(stack.service.db, acc.accountId, "starter");
      const retried = await post(stack.url, "/settle", payment, acc.apiKey);
      assert.equal(retried.status, 200);
      assert.equal(((await retried.json()) as { success: boolean }).success, true);
      assert.equal(await paidTo(), before + AMOUNT);
      assert.deepEqual(await usage(acc.accountId), { used: 11, reserved: 0 });
    });

    test("the 402's upgrade link answers the key's plan, usage and how to upgrade; 401 without a key", async () => {
      const acc = await freshAccount("upgrade-link", "free", 10);
      const res = await fetch(`${stack.url}/api/billing/upgrade`, {
        headers: { "x-api-key": acc.apiKey },
      });
      assert.equal(res.status, 200);
      const out = (await res.json()) as Record<string, unknown> & {
        plans: { plan: string; monthlySettlements: number }[];
        upgrade: { operatorCommand: string };
      };
      assert.equal(out["accountId"], acc.accountId);
      assert.equal(out["plan"], "free");
      assert.equal(out["limit"], 10);
      assert.equal(out["usedThisMonth"], 10);
      assert.equal(out["metered"], true);
      assert.deepEqual(
        out.plans.map((p) => p.plan),
        ["free", "starter", "pro", "max", "payg"],
      );
      assert.ok(out.upgrade.operatorCommand.includes(acc.accountId));

      await setAccountPlan(stack.service.db, acc.accountId, "pro");
      const after = (await (
        await fetch(`${stack.url}/api/billing/upgrade`, { headers: { "x-api-key": acc.apiKey } })
      ).json()) as Record<string, unknown>;
      assert.equal(after["plan"], "pro", "a plan change shows at once");
      assert.equal(after["limit"], 100_000);

      const anonymous = await fetch(`${stack.url}/api/billing/upgrade`);
      assert.equal(anonymous.status, 401);
      assert.equal(((await anonymous.json()) as { error: string }).error, "unauthorized");
    });

    test("one unit left: 50 parallel settles over two replicas give exactly one settlement and 49 answers of 402", async () => {
      const acc = await freshAccount("last-unit", "free", 9);
      const replica = await startReplica();
      const urlB = await replica.listen();
      const before = await paidTo();
      const bodies = await Promise.all(
        Array.from({ length: 50 }, (_, i) => body(stack.payerKeys[i % 6]!)),
      );
      const responses = await Promise.all(
        bodies.map(async (b, i) => {
          const r = await post(i % 2 ? urlB : stack.url, "/settle", b, acc.apiKey);
          return { status: r.status, json: (await r.json()) as Record<string, unknown> };
        }),
      );
      await replica.close();
      const ok = responses.filter((r) => r.status === 200);
      const refused = responses.filter((r) => r.status === 402);
      assert.equal(ok.length, 1, JSON.stringify(responses.map((r) => r.status)));
      assert.equal(ok[0]!.json["success"], true);
      assert.equal(refused.length, 49);
      for (const r of refused) {
        assert.equal(r.json["error"], "quota_exceeded");
        assert.equal(r.json["limit"], 10);
      }
      assert.equal(await paidTo(), before + AMOUNT, "exactly one transfer on-chain");
      assert.deepEqual(await usage(acc.accountId), { used: 10, reserved: 0 });
      assert.deepEqual(
        (await settlementsOf(acc.accountId)).map((r) => r.status),
        ["succeeded"],
      );
    });

    test("pay-as-you-go: units beyond 1,000 accrue usage charges; a suspended account gets 402", async () => {
      const acc = await freshAccount("payg", "payg", 999);
      for (const key of [stack.payerKeys[3]!, stack.payerKeys[4]!]) {
        const res = await post(stack.url, "/settle", await body(key), acc.apiKey);
        assert.equal(res.status, 200);
        assert.equal(((await res.json()) as { success: boolean }).success, true);
      }
      assert.deepEqual(await usage(acc.accountId), { used: 1001, reserved: 0 });
      const charges = await stack.service.db
        .selectFrom("usage_charges")
        .selectAll()
        .where("account_id", "=", acc.accountId)
        .execute();
      assert.equal(charges.length, 1);
      assert.equal(charges[0]!.units, 1);
      assert.equal(String(charges[0]!.amount_micro_usd), "1000", "0.001 USD");
      assert.equal(charges[0]!.month, monthOf(new Date()));
      assert.ok(charges[0]!.settlement_id);

      await setAccountSuspended(stack.service.db, acc.accountId, true);
      const payment = await body(stack.payerKeys[5]!);
      const res = await post(stack.url, "/settle", payment, acc.apiKey);
      assert.equal(res.status, 402);
      const out = (await res.json()) as Record<string, unknown>;
      assert.deepEqual(Object.keys(out).sort(), [
        "error",
        "limit",
        "message",
        "plan",
        "requestId",
        "upgrade",
        "usedThisMonth",
      ]);
      assert.equal(out["error"], "account_suspended");
      assert.equal(out["plan"], "payg");
      assert.equal(out["usedThisMonth"], 1001);
      const verify = await post(stack.url, "/verify", payment, acc.apiKey);
      assert.equal(verify.status, 200);

      await setAccountSuspended(stack.service.db, acc.accountId, false);
      const resumed = await post(stack.url, "/settle", payment, acc.apiKey);
      assert.equal(resumed.status, 200);
      assert.deepEqual(await usage(acc.accountId), { used: 1002, reserved: 0 });
    });

    test("3.2 bound: the same id and payment replays the body verbatim, with no transaction and no quota", async () => {
      const acc = await freshAccount("replay");
      const payment = await body(stack.payerKeys[0]!, "pay_replay_0000000000001");
      const before = await paidTo();
      const first = await post(stack.url, "/settle", payment, acc.apiKey);
      assert.equal(first.status, 200);
      const firstText = await first.text();
      assert.equal((JSON.parse(firstText) as { success: boolean }).success, true);
      const second = await post(stack.url, "/settle", payment, acc.apiKey);
      assert.equal(second.status, 200);
      assert.equal(await second.text(), firstText);
      assert.equal(await paidTo(), before + AMOUNT, "one transfer");
      assert.equal((await settlementsOf(acc.accountId)).length, 1, "no second attempt");
      assert.deepEqual(await usage(acc.accountId), { used: 1, reserved: 0 }, "replay is free");
      const row = await stack.service.db
        .selectFrom("payment_identifiers")
        .selectAll()
        .where("api_key_id", "=", acc.keyId)
        .executeTakeFirstOrThrow();
      assert.equal(row.status, "bound");
      assert.equal(row.response, firstText);
    });

    test("3.2 / 7: the same id with a different payment is 409 and moves nothing", async () => {
      const acc = await freshAccount("conflict");
      const id = "pay_conflict_00000000001";
      const first = await post(
        stack.url,
        "/settle",
        await body(stack.payerKeys[1]!, id),
        acc.apiKey,
      );
      assert.equal(first.status, 200);
      const before = await paidTo();
      const res = await post(stack.url, "/settle", await body(stack.payerKeys[1]!, id), acc.apiKey);
      assert.equal(res.status, 409);
      const out = (await res.json()) as Record<string, unknown>;
      assert.equal(out["error"], "payment_identifier_conflict");
      assert.equal(await paidTo(), before);
      assert.equal((await settlementsOf(acc.accountId)).length, 1);
      assert.deepEqual(await usage(acc.accountId), { used: 1, reserved: 0 });
    });

    test("3.2 / 7: the same id and payload with other requirements is 409, not a copy of the first answer", async () => {
      const acc = await freshAccount("conflict-req");
      const id = "pay_conflict_req_0000001";
      const payment = await body(stack.payerKeys[1]!, id);
      const first = await post(stack.url, "/settle", payment, acc.apiKey);
      assert.equal(first.status, 200);
      assert.equal(((await first.json()) as { success: boolean }).success, true);
      const before = await paidTo();
      for (const paymentRequirements of [
        { ...payment.paymentRequirements, amount: "1" },
        { ...payment.paymentRequirements, payTo: "0x000000000000000000000000000000000000beef" },
      ]) {
        const res = await post(
          stack.url,
          "/settle",
          { ...payment, paymentRequirements },
          acc.apiKey,
        );
        assert.equal(res.status, 409, await res.clone().text());
        assert.equal(
          ((await res.json()) as { error: string }).error,
          "payment_identifier_conflict",
        );
      }
      assert.equal(await paidTo(), before);
      assert.equal((await settlementsOf(acc.accountId)).length, 1);
    });

    test("ids are scoped to the API key: another key may use the same id", async () => {
      const a = await freshAccount("scope-a");
      const b = await freshAccount("scope-b");
      const id = "pay_scoped_0000000000001";
      const before = await paidTo();
      const ra = await post(stack.url, "/settle", await body(stack.payerKeys[2]!, id), a.apiKey);
      const rb = await post(stack.url, "/settle", await body(stack.payerKeys[2]!, id), b.apiKey);
      assert.equal(ra.status, 200);
      assert.equal(rb.status, 200);
      assert.equal(await paidTo(), before + 2n * AMOUNT);
    });

    test("3.2 failure releases the id; a retry re-executes", async () => {
      const acc = await freshAccount("release");
      const id = "pay_release_000000000001";
      const requirements = reqs();
      const expired = await signAuthorization(stack.payerKeys[3]!, requirements, {
        to: PAY_TO,
        value: AMOUNT,
        validAfter: 0n,
        validBefore: nowSeconds() - 10n,
      });
      const failing = {
        x402Version: 2,
        paymentPayload: withId(expired, id),
        paymentRequirements: requirements,
      };
      for (let i = 0; i < 2; i++) {
        const res = await post(stack.url, "/settle", failing, acc.apiKey);
        assert.equal(res.status, 200);
        assert.equal(((await res.json()) as { success: boolean }).success, false);
        const rows = await stack.service.db
          .selectFrom("payment_identifiers")
          .selectAll()
          .where("api_key_id", "=", acc.keyId)
          .execute();
        assert.equal(rows.length, 0, "released");
      }
      assert.deepEqual(
        (await settlementsOf(acc.accountId)).map((r) => r.status),
        ["failed", "failed"],
        "the retry ran again",
      );
      // The released id is free for a payment that succeeds.
      const ok = await post(stack.url, "/settle", await body(stack.payerKeys[3]!, id), acc.apiKey);
      assert.equal(ok.status, 200);
      assert.equal(((await ok.json()) as { success: boolean }).success, true);
    });

    test("7: a malformed id, or a missing one declared required, is 400 on /settle and /verify", async () => {
      const acc = await freshAccount("malformed");
      const requirements = reqs();
      const payload = await signPayment(stack.payerKeys[4]!, requirements);
      const cases: PaymentPayload[] = [
        withId(payload, "short"),
        withId(payload, "has spaces and !!! in it ok"),
        withId(payload, undefined, true),
        { ...payload, extensions: { "payment-identifier": { info: { id: 42 } } } } as never,
      ];
      const before = await paidTo();
      for (const p of cases) {
        for (const path of ["/settle", "/verify"]) {
          const res = await post(
            stack.url,
            path,
            { x402Version: 2, paymentPayload: p, paymentRequirements: requirements },
            acc.apiKey,
          );
          assert.equal(res.status, 400, `${path} ${JSON.stringify(p.extensions)}`);
          const out = (await res.json()) as Record<string, unknown>;
          assert.equal(out["error"], "invalid_payment_identifier");
        }
      }
      assert.equal(await paidTo(), before);
      assert.equal((await settlementsOf(acc.accountId)).length, 0);
      // required: false with no id is simply not idempotent.
      const res = await post(
        stack.url,
        "/settle",
        {
          x402Version: 2,
          paymentPayload: withId(payload, undefined, false),
          paymentRequirements: requirements,
        },
        acc.apiKey,
      );
      assert.equal(res.status, 200);
    });

    test("100 concurrent identical settles across two replicas: one transfer, 100 identical bodies", async () => {
      const acc = await freshAccount("concurrent");
      const replica = await startReplica();
      try {
        const urlB = await replica.listen();
        const payerKey = stack.payerKeys[5]!;
        const payer = privateKeyToAccount(payerKey).address;
        const payment = await body(payerKey, "pay_concurrent_000000001");
        const payerBefore = await usdcBalance(stack.rpcUrl, stack.usdc, payer);
        const before = await paidTo();
        const started = Date.now();
        const responses = await Promise.all(
          Array.from({ length: 100 }, async (_, i) => {
            const r = await post(i % 2 ? urlB : stack.url, "/settle", payment, acc.apiKey);
            return { status: r.status, text: await r.text() };
          }),
        );
        const elapsed = Date.now() - started;
        const statuses = new Set(responses.map((r) => r.status));
        assert.deepEqual([...statuses], [200]);
        const texts = new Set(responses.map((r) => r.text));
        assert.equal(texts.size, 1, [...texts].join("\n"));
        assert.equal((JSON.parse(responses[0]!.text) as { success: boolean }).success, true);
        assert.equal(await paidTo(), before + AMOUNT, "exactly one transfer");
        assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payer), payerBefore - AMOUNT);
        assert.deepEqual(
          (await settlementsOf(acc.accountId)).map((r) => r.status),
          ["succeeded"],
        );
        assert.deepEqual(await usage(acc.accountId), { used: 1, reserved: 0 });
        console.log(`# 100 identical settles over 2 replicas (${backend}): ${elapsed} ms`);
      } finally {
        await replica.close();
      }
    });
  });
}
