/**
 * One signed payment is delivered once, on every chain family.
 *
 * A resource server built with the official `@x402/express` middleware and
 * `HTTPFacilitatorClient` pointed at the service delivers its content on
 * every `success: true` it is answered. So the promise is checked where it
 * matters: a payment header sent many times at once buys one response, one
 * payment settled many times at once is one transfer and one transaction,
 * a replay after success buys nothing and moves nothing, and neither does
 * another signed payment reusing the consumed nonce. Every test reads the
 * ledger's balances and the settlements table, not only status codes.
 *
 * Each test pays its own route with its own payer and price, so tests do
 * not see each other's rows or transfers and pass alone or in any order.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { paymentMiddleware } from "@x402/express";
import { x402ResourceServer } from "@x402/core/server";
import { x402HTTPClient, type x402Client } from "@x402/core/client";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { facilitatorClient, listenOnLoopback, type Listening } from "../support/resourceServer.js";
import { onlyOneSuccess, post, settleAtOnce } from "../support/http.js";
import { startStack, type TestStack } from "../support/stack.js";
import { recorded, sameAddress } from "./adapter.js";
import { families } from "./index.js";

/** Each test's route, payer and price: nothing shared between tests. */
const CASES = {
  concurrent: { path: "/concurrent", payer: 0, price: 1_101n },
  replay: { path: "/replay", payer: 1, price: 2_203n },
  reuse: { path: "/reuse", payer: 2, price: 3_307n },
  atOnce: { path: "/at-once", payer: 3, price: 4_409n },
} as const;
/** What the second payment of the nonce test asks: another amount, so another message. */
const REUSED_PRICE = 3_308n;
/** The copies of one header sent at once (the first test's title names them). */
const COPIES = 10;
/** The copies of one payment settled at once, straight to /settle. */
const SETTLES_AT_ONCE = 50;

interface SettleAnswer {
  success: boolean;
  transaction: string;
  errorReason?: string;
  errorMessage?: string;
}

interface VerifyAnswer {
  isValid: boolean;
  invalidReason?: string;
  invalidMessage?: string;
}

for (const family of families) {
  describe(`one delivery per payment: ${family.name}`, () => {
    let stack: TestStack;
    let server: Listening | undefined;

    before(async () => {
      stack = await startStack(family.stack);
      const resourceServer = family.registerServer(
        new x402ResourceServer(facilitatorClient(stack)),
      );
      const app = express();
      app.use(
        paymentMiddleware(
          Object.fromEntries(
            Object.values(CASES).map((c) => [
              `GET ${c.path}`,
              {
                accepts: {
                  scheme: "exact",
                  price: family.price(c.price),
                  network: family.network,
                  payTo: family.payTo(stack),
                },
                description: `one delivery, ${c.path}`,
                mimeType: "application/json",
              },
            ]),
          ),
          resourceServer,
        ),
      );
      for (const c of Object.values(CASES)) {
        app.get(c.path, (_req, res) => void res.json({ delivered: c.path }));
      }
      server = await listenOnLoopback(app);
    });

    after(async () => {
      await server?.close();
      await stack?.stop();
    });

    const urlOf = (path: string) => `${server!.origin}${path}`;
    const payToBalance = () => family.balanceOf(stack, family.payTo(stack));

    /** A payload for the route's 402, and its header, as `@x402/fetch` makes them. */
    const signFor = async (path: string, client: x402Client) => {
      const unpaid = await fetch(urlOf(path));
      assert.equal(unpaid.status, 402, "the route asks for payment");
      const http = new x402HTTPClient(client);
      const required = http.getPaymentRequiredResponse(
        (name) => unpaid.headers.get(name),
        await unpaid.json().catch(() => undefined),
      );
      const payload = await client.createPaymentPayload(required);
      return { payload, headers: http.encodePaymentSignatureHeader(payload) };
    };

    /** Pays the route once through the middleware; the payload it bought with. */
    const payOnce = async (c: (typeof CASES)[keyof typeof CASES]) => {
      const client = await family.client(stack, c.payer);
      const before = await payToBalance();
      const { payload, headers } = await signFor(c.path, client);
      const res = await fetch(urlOf(c.path), { headers });
      assert.equal(
        res.status,
        200,
        res.headers.get("payment-required") ?? (await res.clone().text()),
      );
      assert.deepEqual(await res.json(), { delivered: c.path });
      assert.equal(await payToBalance(), before + c.price, "the first payment moved the price");
      return { payload, headers };
    };

    const rowsOf = (amount: bigint) =>
      stack.service.db
        .selectFrom("settlements")
        .selectAll()
        .where("network", "=", family.network)
        .where("amount", "=", amount.toString())
        .execute();

    const settle = async (payload: PaymentPayload, requirements: PaymentRequirements) => {
      const res = await post(
        stack.url,
        "/settle",
        { x402Version: 2, paymentPayload: payload, paymentRequirements: requirements },
        stack.apiKey,
      );
      assert.equal(res.status, 200);
      return (await res.json()) as SettleAnswer;
    };

    const verify = async (payload: PaymentPayload, requirements: PaymentRequirements) => {
      const res = await post(
        stack.url,
        "/verify",
        { x402Version: 2, paymentPayload: payload, paymentRequirements: requirements },
        stack.apiKey,
      );
      assert.equal(res.status, 200);
      return (await res.json()) as VerifyAnswer;
    };

    test("one payment header in 10 concurrent requests through the official middleware: one 200, nine 402", async () => {
      const c = CASES.concurrent;
      const client = await family.client(stack, c.payer);
      const payer = await family.payer(stack, c.payer);
      const before = await payToBalance();
      const { headers } = await signFor(c.path, client);

      const responses = await Promise.all(
        Array.from({ length: COPIES }, async () => {
          const res = await fetch(urlOf(c.path), { headers });
          return { res, body: await res.text() };
        }),
      );

      const statuses = responses.map((r) => r.res.status).sort();
      assert.deepEqual(statuses, [200, ...Array<number>(COPIES - 1).fill(402)]);
      const delivered = responses.filter((r) => r.body.includes(c.path));
      assert.equal(delivered.length, 1, "the content was delivered once");
      const paid = responses.find((r) => r.res.status === 200)!;
      const receipt = new x402HTTPClient(client).getPaymentSettleResponse((n) =>
        paid.res.headers.get(n),
      );
      assert.equal(receipt.success, true);
      assert.notEqual(receipt.transaction, "");

      assert.equal(await payToBalance(), before + c.price, "exactly one price moved");
      const succeeded = (await rowsOf(c.price)).filter((r) => r.status === "succeeded");
      assert.deepEqual(
        succeeded.map((r) => [r.transaction, r.payer, r.pay_to, r.account_id]),
        [[receipt.transaction, recorded(payer), recorded(family.payTo(stack)), stack.accountId]],
      );
    });

    test(`one payment in ${SETTLES_AT_ONCE} concurrent /settle calls: one success answer, one transfer, one transaction sent, one record counting every attempt`, async () => {
      const c = CASES.atOnce;
      const client = await family.client(stack, c.payer);
      const payer = await family.payer(stack, c.payer);
      const { payload } = await signFor(c.path, client);
      const [payToBefore, payerBefore] = [
        await payToBalance(),
        await family.balanceOf(stack, payer),
      ];

      const answers = await settleAtOnce(
        [stack.url],
        { x402Version: 2, paymentPayload: payload, paymentRequirements: payload.accepted },
        stack.apiKey,
        SETTLES_AT_ONCE,
      );
      // A copy meets the first while it settles, or its success once answered.
      const paid = onlyOneSuccess(answers, ["duplicate_settlement", family.reasons.replay]);

      // The ledger, read through the adapter, holds one transfer of the price.
      const moved = await family.transfersOf(stack, paid.transaction);
      assert.ok(
        moved && "transfers" in moved,
        `${paid.transaction}: ${moved && "failure" in moved ? moved.failure : "not held by the ledger"}`,
      );
      const payTo = family.payTo(stack);
      const ours = moved.transfers.filter(
        (t) =>
          sameAddress(t.from, payer) &&
          sameAddress(t.to, payTo) &&
          sameAddress(t.asset, payload.accepted.asset),
      );
      assert.deepEqual(
        ours.map((t) => t.amount),
        [c.price],
        "the transaction's transfers, as the ledger holds them",
      );

      const fee = (await family.payerFee?.(stack, paid.transaction)) ?? 0n;
      assert.equal(await payToBalance(), payToBefore + c.price, "one transfer reached payTo");
      assert.equal(
        await family.balanceOf(stack, payer),
        payerBefore - c.price - fee,
        "the price left the payer once",
      );
      const rows = await rowsOf(c.price);
      assert.deepEqual(
        rows.map((r) => [r.status, r.attempts, r.transaction, r.payer]),
        [["succeeded", SETTLES_AT_ONCE, paid.transaction, recorded(payer)]],
      );
      const sent = await stack.service.db
        .selectFrom("settlement_transactions")
        .select("reference")
        .where("settlement_id", "=", rows[0]!.id)
        .execute();
      assert.deepEqual(
        sent.map((t) => t.reference),
        [paid.transaction],
        "one transaction was ever sent",
      );
    });

    test(`a replay after success is refused with ${family.reasons.replay} and moves nothing`, async () => {
      const c = CASES.replay;
      const payer = await family.payer(stack, c.payer);
      const { payload, headers } = await payOnce(c);
      const requirements = payload.accepted;
      const [payToBefore, payerBefore] = [
        await payToBalance(),
        await family.balanceOf(stack, payer),
      ];

      const replay = await settle(payload, requirements);
      assert.deepEqual(
        [replay.success, replay.errorReason, replay.transaction],
        [false, family.reasons.replay, ""],
        replay.errorMessage,
      );
      const checked = await verify(payload, requirements);
      assert.deepEqual(
        [checked.isValid, checked.invalidReason],
        [false, "duplicate_settlement"],
        checked.invalidMessage,
      );
      // The same header through the middleware again buys nothing either.
      const again = await fetch(urlOf(c.path), { headers });
      assert.equal(again.status, 402);
      assert.ok(!(await again.text()).includes(c.path), "no second delivery");

      assert.equal(await payToBalance(), payToBefore, "nothing reached payTo");
      assert.equal(await family.balanceOf(stack, payer), payerBefore, "nothing left the payer");
      const rows = await rowsOf(c.price);
      assert.deepEqual(
        rows.map((r) => [r.status, r.payer]),
        [["succeeded", recorded(payer)]],
        "one record, still the one success",
      );
    });

    if (family.signReusingNonce) {
      const signReusingNonce = family.signReusingNonce.bind(family);
      test("another payment reusing the consumed nonce is refused", async () => {
        const c = CASES.reuse;
        const payer = await family.payer(stack, c.payer);
        const { payload: first } = await payOnce(c);
        const requirements = { ...first.accepted, amount: REUSED_PRICE.toString() };
        const second = await signReusingNonce(stack, c.payer, first, requirements);
        const [payToBefore, payerBefore] = [
          await payToBalance(),
          await family.balanceOf(stack, payer),
        ];

        const checked = await verify(second, requirements);
        assert.deepEqual(
          [checked.isValid, checked.invalidReason],
          [false, family.reasons.replay],
          "a consumed nonce is not valid, and /verify says why",
        );
        const out = await settle(second, requirements);
        assert.deepEqual(
          [out.success, out.errorReason, out.transaction],
          [false, family.reasons.replay, ""],
          out.errorMessage,
        );

        assert.equal(await payToBalance(), payToBefore, "nothing reached payTo");
        assert.equal(await family.balanceOf(stack, payer), payerBefore, "nothing left the payer");
        const reused = await rowsOf(REUSED_PRICE);
        assert.ok(
          reused.every((r) => r.status !== "succeeded" && r.transaction === null),
          `no success and no transaction recorded for the second payment: ${JSON.stringify(reused)}`,
        );
        assert.deepEqual(
          (await rowsOf(c.price)).map((r) => r.status),
          ["succeeded"],
        );
      });
    }
  });
}
