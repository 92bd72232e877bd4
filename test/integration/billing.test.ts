/**
 * Plans paid for in x402, end to end on a devnet: the upgrade path is an
 * x402-protected resource paid with the official `@x402/fetch` client,
 * settled by this service's own payment core into BILLING_PAY_TO; the plan
 * changes at once and a replay changes nothing; an API key may only buy
 * (403 otherwise) and a session never switches to a paid plan unpaid;
 * pay-as-you-go's charges draw a prepaid balance, suspend the account at
 * the charge it cannot cover, and a top-up lifts it, with billing webhooks
 * delivered in order.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { Webhook } from "standardwebhooks";
import { wrapFetchWithPayment, x402Client, decodePaymentResponseHeader } from "@x402/fetch";
import { registerExactEvmScheme } from "@x402/evm/exact/client";
import { decodePaymentRequiredHeader } from "@x402/core/http";
import { HTTPFacilitatorClient } from "@x402/core/server";
import { startStack, type TestStack } from "../support/stack.js";
import { availableBackends } from "../support/database.js";
import { requirementsFor, signPayment, usdcBalance } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { apiKeyAuth } from "../support/resourceServer.js";
import { signedInUser } from "../support/dashboardSession.js";
import { until } from "../support/processes.js";
import { startRpcProxy, type RpcProxy } from "../support/rpcProxy.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { compPlan } from "../../src/features/billing/billingLedger.js";
import { BILLING_ACCOUNT_ID } from "../../src/features/billing/billingAccount.js";
import { setAccountPlan } from "../../src/features/plans/quotaLedger.js";
import { monthOf } from "../../src/features/plans/plans.js";
import { generateWebhookSecret } from "../../src/features/webhooks/signing.js";
import { BILLING_EVENT_TYPES } from "../../src/features/webhooks/billingEvents.js";

const TREASURY = "0x7e45000000000000000000000000000000007e45" as Hex;
const MERCHANT = "0x000000000000000000000000000000000000dEaD";

for (const backend of availableBackends()) {
  describe(`plans paid in x402 (${backend})`, () => {
    let stack: TestStack;
    // Between the service and the chain, so a test can take the chain away.
    let proxy: RpcProxy | undefined;

    before(async () => {
      stack = await startStack({
        backend,
        payers: 6,
        baseRpcUrl: async (nodeUrl) => {
          proxy = await startRpcProxy(nodeUrl);
          return proxy.url;
        },
        env: {
          METER_SETTLEMENTS: "true",
          BILLING_PAY_TO: TREASURY,
          WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
        },
      });
    });
    after(async () => {
      await stack?.stop();
      await proxy?.close();
    });

    const account = async (name: string, plan?: "payg" | "pro") => {
      const acc = await createAccount(stack.service.db, name);
      if (plan) await setAccountPlan(stack.service.db, acc.id, plan);
      const key = await createApiKey(stack.service.db, acc.id, name);
      return { id: acc.id, key: key.key };
    };
    const setUsed = (accountId: string, used: number) =>
      stack.service.db
        .insertInto("quota_usage")
        .values({ account_id: accountId, month: monthOf(new Date()), used })
        .onConflict((oc) => oc.columns(["account_id", "month"]).doUpdateSet({ used }))
        .execute();
    const accountRow = async (id: string) => {
      const row = await stack.service.db
        .selectFrom("accounts")
        .select(["plan", "paid_until", "balance_micro_usd", "suspended_at", "suspended_by"])
        .where("id", "=", id)
        .executeTakeFirstOrThrow();
      // bigint: a string from PostgreSQL, a number from PGlite.
      return { ...row, balance_micro_usd: String(row.balance_micro_usd) };
    };
    /** A settle of 0.01 USDC to a merchant through the official facilitator client. */
    const settleWith = async (apiKey: string, payer: number) => {
      const requirements = requirementsFor({
        network: stack.network,
        usdc: stack.usdc,
        payTo: MERCHANT,
      });
      const payload = await signPayment(stack.payerKeys[payer]!, requirements);
      return new HTTPFacilitatorClient({
        url: stack.url,
        createAuthHeaders: apiKeyAuth(apiKey),
      }).settle(payload, requirements);
    };
    /** `fetch` paying 402s with the official client and a devnet payer, remembering what it sent. */
    const payingFetch = (payer: number, cap = "$10") => {
      const sent: Request[] = [];
      // A program pays at most what it means to: the official client's cap
      // ($1 by default) is raised to the plan's price, not turned off.
      const client = new x402Client().setSpendControls({ maxAmountPerPayment: cap });
      registerExactEvmScheme(client, { signer: privateKeyToAccount(stack.payerKeys[payer]!) });
      const recording: typeof fetch = (input, init) => {
        const request = new Request(input, init);
        sent.push(request.clone());
        return fetch(request);
      };
      return { fetch: wrapFetchWithPayment(recording, client), sent };
    };

    test("a free account at its quota follows the 402's upgrade with @x402/fetch, pays Starter, and settles again; USDC moves once to BILLING_PAY_TO; a replay changes nothing", async () => {
      const acc = await account("quota-upgrade");
      await setUsed(acc.id, 10);
      const refused = await post(
        stack.url,
        "/settle",
        {
          x402Version: 2,
          ...(await (async () => {
            const requirements = requirementsFor({
              network: stack.network,
              usdc: stack.usdc,
              payTo: MERCHANT,
            });
            return {
              paymentPayload: await signPayment(stack.payerKeys[0]!, requirements),
              paymentRequirements: requirements,
            };
          })()),
        },
        acc.key,
      );
      assert.equal(refused.status, 402);
      const body = (await refused.json()) as { error: string; upgrade: string; plan: string };
      assert.equal(body.error, "quota_exceeded");
      assert.equal(body.plan, "free");

      const treasuryBefore = await usdcBalance(stack.rpcUrl, stack.usdc, TREASURY);
      const payer = privateKeyToAccount(stack.payerKeys[1]!).address;
      const payerBefore = await usdcBalance(stack.rpcUrl, stack.usdc, payer);
      const paying = payingFetch(1);
      const res = await paying.fetch(new URL(body.upgrade, stack.url), {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": acc.key },
        body: JSON.stringify({ plan: "starter" }),
      });
      const paid = (await res.json()) as {
        applied: boolean;
        payment: { amountUsd: string; transaction: string; periodEnd: string };
        plan: { plan: string; paidUntil: string };
      };
      assert.equal(res.status, 200, JSON.stringify(paid));
      assert.equal(paying.sent.length, 2, "one 402, then one paid request");
      const offer = decodePaymentRequiredHeader(
        (await fetch(new URL(body.upgrade, stack.url), {
          method: "POST",
          headers: { "content-type": "application/json", "x-api-key": acc.key },
          body: JSON.stringify({ plan: "starter" }),
        }).then((r) => r.headers.get("payment-required")))!,
      );
      // (asked again after the payment: the account is on Starter now, so a
      // second Starter payment would be a renewal, offered at the same price)
      assert.deepEqual(
        offer.accepts.map((a) => [a.scheme, a.network, a.amount, a.payTo, a.asset.toLowerCase()]),
        [["exact", stack.network, "5000000", TREASURY.toLowerCase(), stack.usdc.toLowerCase()]],
      );
      const receipt = decodePaymentResponseHeader(res.headers.get("payment-response")!);
      assert.equal(receipt.success, true);
      assert.equal(paid.applied, true);
      assert.equal(paid.payment.amountUsd, "5.00");
      assert.equal(paid.payment.transaction, receipt.transaction);
      assert.equal(paid.plan.plan, "starter");
      const row = await accountRow(acc.id);
      assert.equal(row.plan, "starter");
      const days = (row.paid_until!.getTime() - Date.now()) / 86_400_000;
      assert.ok(days > 29.9 && days <= 30, `paid for 30 days (${days})`);
      assert.equal(paid.plan.paidUntil, row.paid_until!.toISOString());

      // Recorded like any settlement, under the billing account, once.
      const settlements = await stack.service.db
        .selectFrom("settlements")
        .select(["status", "transaction", "pay_to", "amount"])
        .where("account_id", "=", BILLING_ACCOUNT_ID)
        .where("transaction", "=", receipt.transaction)
        .execute();
      assert.deepEqual(settlements, [
        {
          status: "succeeded",
          transaction: receipt.transaction,
          pay_to: TREASURY.toLowerCase(),
          amount: "5000000",
        },
      ]);
      const payments = await stack.service.db
        .selectFrom("billing_payments")
        .select(["status", "kind", "plan", "amount_micro_usd", "source", "settlement_id"])
        .where("account_id", "=", acc.id)
        .execute();
      assert.equal(payments.length, 1);
      assert.deepEqual(
        {
          ...payments[0]!,
          amount_micro_usd: String(payments[0]!.amount_micro_usd),
          settlement_id: Boolean(payments[0]!.settlement_id),
        },
        {
          status: "paid",
          kind: "plan",
          plan: "starter",
          amount_micro_usd: "5000000",
          source: "api_key",
          settlement_id: true,
        },
      );
      assert.equal(
        await usdcBalance(stack.rpcUrl, stack.usdc, TREASURY),
        treasuryBefore + 5_000_000n,
      );
      assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payer), payerBefore - 5_000_000n);

      // The next settle goes through.
      const next = await settleWith(acc.key, 2);
      assert.equal(next.success, true);

      // A replay of the same payment: answered from its record, nothing changes.
      const signature = paying.sent[1]!.headers.get("payment-signature")!;
      assert.ok(signature);
      const replay = await fetch(new URL(body.upgrade, stack.url), {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-api-key": acc.key,
          "payment-signature": signature,
        },
        body: JSON.stringify({ plan: "starter" }),
      });
      const replayed = (await replay.json()) as { applied: boolean };
      assert.equal(replay.status, 200);
      assert.equal(replayed.applied, false);
      // The same payment under another account's key is refused, and moves nothing either.
      const other = await account("replay-elsewhere");
      const stolen = await fetch(new URL(body.upgrade, stack.url), {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-api-key": other.key,
          "payment-signature": signature,
        },
        body: JSON.stringify({ plan: "starter" }),
      });
      assert.equal(stolen.status, 409);
      assert.equal((await accountRow(other.id)).plan, "free");
      const after = await accountRow(acc.id);
      assert.deepEqual(after.paid_until, row.paid_until, "the period was not extended twice");
      assert.equal(
        await usdcBalance(stack.rpcUrl, stack.usdc, TREASURY),
        treasuryBefore + 5_000_000n,
        "USDC moved once",
      );
      assert.equal(
        (
          await stack.service.db
            .selectFrom("billing_payments")
            .select("id")
            .where("account_id", "in", [acc.id, other.id])
            .execute()
        ).length,
        1,
      );
      // Whatever the account is on now, the payment is what it bought: after
      // a move to Pro, a replay is still answered from its record (not
      // refused as a downgrade), and changes nothing.
      await compPlan(stack.service.db, acc.id, "pro", { days: 30 });
      const late = await fetch(new URL(body.upgrade, stack.url), {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-api-key": acc.key,
          "payment-signature": signature,
        },
        body: JSON.stringify({ plan: "starter" }),
      });
      assert.equal(late.status, 200);
      assert.equal(((await late.json()) as { applied: boolean }).applied, false);
      assert.equal((await accountRow(acc.id)).plan, "pro");
    });

    test("a chain outage during a checkout: 503 to retry, not a refused payment, nothing charged or recorded as failed; the same payment once the chain is back buys the plan once", async () => {
      const acc = await account("outage-checkout");
      const payer = privateKeyToAccount(stack.payerKeys[3]!).address;
      const payerBefore = await usdcBalance(stack.rpcUrl, stack.usdc, payer);
      const treasuryBefore = await usdcBalance(stack.rpcUrl, stack.usdc, TREASURY);
      const paying = payingFetch(3);
      const upgrade = () =>
        paying.fetch(new URL("/api/billing/upgrade", stack.url), {
          method: "POST",
          headers: { "content-type": "application/json", "x-api-key": acc.key },
          body: JSON.stringify({ plan: "starter" }),
        });
      // The 402 is built without the chain; the paid retry meets the outage.
      proxy!.state.down = true;
      let down: Response;
      try {
        down = await upgrade();
      } finally {
        proxy!.state.down = false;
      }
      const downBody = (await down.json()) as { error: string };
      assert.equal(down.status, 503, JSON.stringify(downBody));
      assert.equal(downBody.error, "service_unavailable");
      assert.ok(down.headers.get("retry-after"));
      assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payer), payerBefore);
      const rows = () =>
        stack.service.db
          .selectFrom("billing_payments")
          .select(["status"])
          .where("account_id", "=", acc.id)
          .execute();
      assert.ok(
        (await rows()).every((r) => r.status !== "failed"),
        "an outage is not the payment's failure",
      );
      assert.equal((await accountRow(acc.id)).plan, "free");

      // The chain back: the very payment the client signed goes through, once.
      const signed = paying.sent.at(-1)!.headers.get("payment-signature")!;
      const again = await fetch(new URL("/api/billing/upgrade", stack.url), {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-api-key": acc.key,
          "payment-signature": signed,
        },
        body: JSON.stringify({ plan: "starter" }),
      });
      assert.equal(again.status, 200, await again.clone().text());
      assert.equal((await accountRow(acc.id)).plan, "starter");
      assert.deepEqual(
        (await rows()).map((r) => r.status),
        ["paid"],
      );
      assert.equal(
        await usdcBalance(stack.rpcUrl, stack.usdc, TREASURY),
        treasuryBefore + 5_000_000n,
      );
    });

    test("a payment header that decodes to no payload (base64 of null) is refused as a bad payment, never a 500", async () => {
      const acc = await account("null-payment");
      const res = await fetch(new URL("/api/billing/upgrade", stack.url), {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-api-key": acc.key,
          "payment-signature": Buffer.from("null").toString("base64"),
        },
        body: JSON.stringify({ plan: "starter" }),
      });
      const body = (await res.json()) as { error?: string };
      assert.ok(res.status >= 400 && res.status < 500, `${res.status} ${JSON.stringify(body)}`);
      assert.equal(typeof body.error, "string");
      assert.equal((await accountRow(acc.id)).plan, "free");
    });

    test("an API key cannot downgrade or leave pay-as-you-go (403), and a session without a payment cannot switch to a paid plan", async () => {
      const upgrade = (key: string, body: unknown, headers: Record<string, string> = {}) =>
        fetch(`${stack.url}/api/billing/upgrade`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-api-key": key, ...headers },
          body: JSON.stringify(body),
        });
      const pro = await account("on-pro");
      await compPlan(stack.service.db, pro.id, "pro", { days: 30 });
      // The price list, as a program reads it.
      const list = (await (
        await fetch(`${stack.url}/api/billing/plans`, { headers: { "x-api-key": pro.key } })
      ).json()) as {
        plans: { plan: string; usdPerPeriod?: string }[];
        billing: { prices: unknown; payTo: string; networks: { network: string }[] } & Record<
          string,
          unknown
        >;
      };
      assert.deepEqual(
        list.plans.map((p) => [p.plan, p.usdPerPeriod ?? null]),
        [
          ["free", null],
          ["starter", "5.00"],
          ["pro", "49.00"],
          ["max", "399.00"],
          ["payg", null],
        ],
      );
      assert.equal(list.billing.payTo, TREASURY.toLowerCase());
      assert.deepEqual(
        list.billing.networks.map((n) => n.network),
        [stack.network],
      );
      assert.equal(list.billing["devnetPayers"], undefined, "no keys to programs");
      const down = await upgrade(pro.key, { plan: "starter" });
      assert.equal(down.status, 403);
      assert.equal(down.headers.get("payment-required"), null, "nothing is offered");
      assert.match(((await down.json()) as { message: string }).message, /downgrade/);
      // A renewal or a higher plan is offered.
      assert.equal((await upgrade(pro.key, { plan: "pro" })).status, 402);
      assert.equal((await upgrade(pro.key, { plan: "max" })).status, 402);

      const payg = await account("on-payg", "payg");
      for (const plan of ["starter", "pro", "max"]) {
        const away = await upgrade(payg.key, { plan });
        assert.equal(away.status, 403, plan);
        assert.match(((await away.json()) as { message: string }).message, /pay-as-you-go/);
      }
      const topUp = await upgrade(payg.key, { topUpUsd: "5" });
      assert.equal(topUp.status, 402);
      const offered = decodePaymentRequiredHeader(topUp.headers.get("payment-required")!);
      assert.equal(offered.accepts[0]!.amount, "5000000");
      // Free and pay-as-you-go are not bought at all.
      assert.equal((await upgrade(payg.key, { plan: "free" })).status, 400);
      assert.equal((await upgrade(payg.key, { plan: "payg" })).status, 400);
      // A made-up payment is refused by the official layer; nothing changes.
      const forged = await upgrade(
        pro.key,
        { plan: "max" },
        { "payment-signature": Buffer.from("{}").toString("base64") },
      );
      assert.equal(forged.status, 402);
      assert.equal((await accountRow(payg.id)).plan, "payg");
      assert.equal((await accountRow(pro.id)).plan, "pro");

      // A person: the checkout asks for the payment, the plan stays Free.
      const person = await signedInUser(stack.service.db, stack.url);
      const unpaid = await person.call("/api/billing/checkout", {
        method: "POST",
        body: { plan: "max" },
      });
      assert.equal(unpaid.status, 402);
      const required = decodePaymentRequiredHeader(unpaid.headers.get("payment-required")!);
      assert.deepEqual(
        required.accepts.map((a) => [a.scheme, a.network, a.amount, a.payTo]),
        [["exact", stack.network, "399000000", TREASURY.toLowerCase()]],
      );
      // The old free switch is gone: the session route is the checkout; the
      // upgrade path takes an API key; the plan-change route takes no paid plan.
      assert.equal(
        (await person.call("/api/billing/upgrade", { method: "POST", body: { plan: "max" } }))
          .status,
        401,
      );
      assert.equal(
        (await person.call("/api/billing/plan-change", { method: "POST", body: { plan: "max" } }))
          .status,
        400,
      );
      assert.equal((await accountRow(person.accountId)).plan, "free");
      assert.equal(
        (
          await stack.service.db
            .selectFrom("billing_payments")
            .select("id")
            .where("account_id", "in", [person.accountId, pro.id, payg.id])
            .where("kind", "!=", "comp")
            .execute()
        ).length,
        0,
      );
    });

    test("pay-as-you-go: 1,003 settlements with a $0.002 balance suspend the account at the 1,003rd's charge; a top-up lifts it; the billing webhooks arrive in order", async (t) => {
      const acc = await account("payg-balance", "payg");
      await stack.service.db
        .updateTable("accounts")
        .set({ balance_micro_usd: 2000 })
        .where("id", "=", acc.id)
        .execute();
      const received: { type: string; data: Record<string, unknown> }[] = [];
      const secret = generateWebhookSecret();
      const receiver = http.createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on("data", (c: Buffer) => chunks.push(c));
        req.on("end", () => {
          const event = new Webhook(secret).verify(Buffer.concat(chunks).toString("utf8"), {
            "webhook-id": String(req.headers["webhook-id"]),
            "webhook-timestamp": String(req.headers["webhook-timestamp"]),
            "webhook-signature": String(req.headers["webhook-signature"]),
          }) as { type: string; data: Record<string, unknown> };
          received.push(event);
          res.writeHead(204).end();
        });
      });
      await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
      t.after(() => new Promise((r) => receiver.close(r)));
      await stack.service.db
        .insertInto("webhook_endpoints")
        .values({
          account_id: acc.id,
          url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`,
          secret,
          events: [...BILLING_EVENT_TYPES],
          updated_at: new Date(),
        })
        .execute();

      // The first 1,000 of the month are free: seeded. Settlements 1,001 to
      // 1,003 are real, and so is every charge they draw.
      await setUsed(acc.id, 1000);
      const figures: string[] = [];
      const balance = async () => (await accountRow(acc.id)).balance_micro_usd;
      for (const [n, payer] of [
        [1001, 0],
        [1002, 2],
        [1003, 3],
      ] as const) {
        const settled = await settleWith(acc.key, payer);
        assert.equal(settled.success, true, `settlement ${n}`);
        const row = await accountRow(acc.id);
        figures.push(
          `settlement ${n}: balance ${row.balance_micro_usd} micro-USD, ${row.suspended_at ? "suspended" : "active"}`,
        );
        assert.equal(Boolean(row.suspended_at), n === 1003, `suspended only at ${n}`);
      }
      assert.equal(await balance(), "-1000");
      assert.equal((await accountRow(acc.id)).suspended_by, "billing");
      const charges = await stack.service.db
        .selectFrom("usage_charges")
        .select(["units", "amount_micro_usd"])
        .where("account_id", "=", acc.id)
        .execute();
      assert.deepEqual(
        charges.map((c) => [c.units, String(c.amount_micro_usd)]),
        [
          [1, "1000"],
          [1, "1000"],
          [1, "1000"],
        ],
      );
      await assert.rejects(
        settleWith(acc.key, 4),
        (e: Error) => /402|account_suspended/.test(e.message),
        "suspended: /settle answers 402",
      );
      figures.push("settlement 1,004: 402 account_suspended");

      // A top-up through the upgrade path lifts it at once.
      const paying = payingFetch(5);
      const topUp = await paying.fetch(`${stack.url}/api/billing/upgrade`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": acc.key },
        body: JSON.stringify({ topUpUsd: "1" }),
      });
      assert.equal(topUp.status, 200, await topUp.clone().text());
      const lifted = await accountRow(acc.id);
      assert.equal(lifted.suspended_at, null);
      assert.equal(lifted.balance_micro_usd, "999000");
      figures.push(`top-up of 1.00 USD: balance ${lifted.balance_micro_usd} micro-USD, active`);
      const again = await settleWith(acc.key, 4);
      assert.equal(again.success, true);
      assert.equal(await balance(), "998000");
      figures.push(`settlement 1,004 retried: balance ${await balance()} micro-USD`);

      await until("three billing webhooks", async () => received.length >= 3 || undefined);
      assert.deepEqual(
        received.map((e) => e.type),
        ["billing.account_suspended", "billing.payment_received", "billing.suspension_lifted"],
      );
      assert.equal(received[0]!.data["balanceMicroUsd"], "-1000");
      assert.equal(received[1]!.data["amountUsd"], "1.00");
      assert.equal(received[2]!.data["balanceMicroUsd"], "999000");
      figures.push(`webhooks: ${received.map((e) => e.type).join(", ")}`);
      for (const f of figures) t.diagnostic(f);
    });
  });
}
