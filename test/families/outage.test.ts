/**
 * A node outage is not the payer's fault, on every chain family.
 *
 * The family's RPC sits behind a proxy that can fail. With the node down,
 * /verify and /settle answer 503 `service_unavailable` with Retry-After,
 * never a payment reason; nothing moves on the ledger, the attempt is
 * recorded `not_attempted` (never the payer's failure, no
 * `settlement.failed` event), and /ready names the network. Once the node
 * is back the same payment verifies afresh and settles, once. Where the
 * adapter names the call that broadcasts a settlement, the node's answer to
 * it is lost once: the payment is never answered as failed, lands once, and
 * one success is answered for it.
 *
 * Each test pays with its own payer and amount, so tests do not see each
 * other's rows or transfers and pass alone or in any order.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { setWebhookEndpoint } from "../../src/features/webhooks/webhookRepository.js";
import { post } from "../support/http.js";
import { until } from "../support/processes.js";
import { startRpcProxy, type RpcProxy } from "../support/rpcProxy.js";
import { startStack, type TestStack } from "../support/stack.js";
import { recorded, withRpcUrl } from "./adapter.js";
import { families } from "./index.js";
import { requestOf, requirementsFor, signedBy } from "./signing.js";

/** Each test's payer and price: nothing shared between tests. */
const CASES = {
  warmUp: { payer: 0, price: 1_013n },
  down: { payer: 1, price: 2_017n },
  lostAnswer: { payer: 2, price: 3_019n },
} as const;

interface SettleAnswer {
  success: boolean;
  transaction: string;
  errorReason?: string;
  errorMessage?: string;
}

for (const family of families) {
  describe(`a node outage: ${family.name}`, () => {
    let stack: TestStack;
    let proxy: RpcProxy | undefined;

    before(async () => {
      stack = await startStack(
        withRpcUrl(family, async (nodeUrl) => {
          proxy = await startRpcProxy(nodeUrl);
          return proxy.url;
        }),
      );
      // A webhook endpoint, so a settlement.failed event would have somewhere to go.
      await setWebhookEndpoint(stack.service.db, stack.accountId, "http://127.0.0.1:9/hook", {
        allowPrivateTargets: true,
      });
    });

    after(async () => {
      await stack?.stop();
      await proxy?.close();
    });

    const payTo = () => family.payTo(stack);
    const balances = async (payer: string) => ({
      payer: await family.balanceOf(stack, payer),
      payTo: await family.balanceOf(stack, payTo()),
    });
    const rowsOf = (payer: string, amount: bigint) =>
      stack.service.db
        .selectFrom("settlements")
        .selectAll()
        .where("network", "=", family.network)
        .where("payer", "=", recorded(payer))
        .where("amount", "=", amount.toString())
        .orderBy("started_at")
        .execute();
    const transactionsOf = async (settlementId: string) =>
      (
        await stack.service.db
          .selectFrom("settlement_transactions")
          .select("reference")
          .where("settlement_id", "=", settlementId)
          .execute()
      ).map((t) => t.reference);
    /** Payer `c.payer`'s payment of `c.price`, signed while the node is up. */
    const payment = async (c: { payer: number; price: bigint }) => {
      const requirements = await requirementsFor(stack, family, c.price);
      const payload = await signedBy(stack, family, c.payer, requirements);
      return { requirements, payload, payer: await family.payer(stack, c.payer) };
    };
    const settle = async (payload: PaymentPayload, requirements: PaymentRequirements) => {
      const res = await post(stack.url, "/settle", requestOf(payload, requirements), stack.apiKey);
      assert.equal(res.status, 200, await res.clone().text());
      return (await res.json()) as SettleAnswer;
    };
    const ready = () => fetch(`${stack.url}/ready`);

    test("the node down: /verify and /settle answer 503 service_unavailable with Retry-After, nothing moves, nothing is the payer's failure, /ready names the network; back up, the payment settles once", async () => {
      // A payment verified first, as a running service has its caches warm.
      const warm = await payment(CASES.warmUp);
      const warmed = await post(
        stack.url,
        "/verify",
        requestOf(warm.payload, warm.requirements),
        stack.apiKey,
      );
      assert.deepEqual(await warmed.json(), { isValid: true, payer: warm.payer });

      const c = CASES.down;
      const { requirements, payload, payer } = await payment(c);
      const body = requestOf(payload, requirements);
      const before = await balances(payer);

      proxy!.state.down = true;
      try {
        for (const path of ["/verify", "/settle"]) {
          const res = await post(stack.url, path, body, stack.apiKey);
          const answer = (await res.json()) as Record<string, unknown>;
          assert.equal(res.status, 503, `${path}: ${JSON.stringify(answer)}`);
          assert.ok(Number(res.headers.get("retry-after")) > 0, `${path} says when to retry`);
          assert.equal(answer["error"], "service_unavailable", path);
          assert.match(String(answer["message"]), new RegExp(`${family.network} RPC`), path);
        }
        // The attempt is on record as not attempted, never as the payer's failure.
        assert.deepEqual(
          (await rowsOf(payer, c.price)).map((r) => [r.status, r.error_reason, r.transaction]),
          [["not_attempted", "service_unavailable", null]],
        );

        const readiness = await ready();
        assert.equal(readiness.status, 503);
        const report = (await readiness.json()) as {
          error: string;
          message: string;
          database: { ok: boolean };
          networks: { network: string; reachable: boolean }[];
        };
        assert.equal(report.error, "service_unavailable");
        assert.equal(report.database.ok, true, "the database is not blamed");
        assert.deepEqual(
          report.networks.filter((n) => !n.reachable).map((n) => n.network),
          [family.network],
        );
        assert.match(report.message, new RegExp(`${family.network} RPC`));
        assert.doesNotMatch(JSON.stringify(report), /http:\/\//, "hosts only, never URLs");
        assert.equal((await fetch(`${stack.url}/health`)).status, 200, "liveness stays green");
        const metrics = await (await fetch(`${stack.url}/metrics`)).text();
        assert.match(metrics, new RegExp(`x402_rpc_reachable\\{network="${family.network}"\\} 0`));
      } finally {
        proxy!.state.down = false;
      }
      assert.deepEqual(await balances(payer), before, "nothing moved during the outage");
      const failed = await stack.service.db
        .selectFrom("webhook_events")
        .select("type")
        .where("account_id", "=", stack.accountId)
        .where("type", "=", "settlement.failed")
        .execute();
      assert.deepEqual(failed, [], "no settlement.failed event for an outage");

      // Back up: the payment is checked afresh (no verdict reached while the
      // node failed is kept), and settles once, as a new attempt.
      await until("/ready to see the node again", async () => (await ready()).ok);
      const verified = await post(stack.url, "/verify", body, stack.apiKey);
      assert.deepEqual(await verified.json(), { isValid: true, payer });
      const settled = await settle(payload, requirements);
      assert.equal(settled.success, true, JSON.stringify(settled));
      const fee = (await family.payerFee?.(stack, settled.transaction)) ?? 0n;
      assert.deepEqual(await balances(payer), {
        payer: before.payer - c.price - fee,
        payTo: before.payTo + c.price,
      });
      // The outage's attempt stays on record as not attempted; the success is the one settlement.
      const rows = await rowsOf(payer, c.price);
      assert.deepEqual(
        rows.map((r) => [r.status, r.transaction]),
        [
          ["not_attempted", null],
          ["succeeded", settled.transaction],
        ],
      );
      assert.deepEqual(await transactionsOf(rows[1]!.id), [settled.transaction]);
    });

    if (family.sendCall) {
      const sendCall = family.sendCall;
      test("the node's answer to the send is lost: never a failure; the payment lands once and one success is answered", async () => {
        const c = CASES.lostAnswer;
        const { requirements, payload, payer } = await payment(c);
        const before = await balances(payer);

        Object.assign(proxy!.state, { dropMatching: sendCall, drops: 1, dropped: 0 });
        let first: SettleAnswer;
        try {
          first = await settle(payload, requirements);
          assert.equal(proxy!.state.dropped, 1, "the send's answer was really lost");
        } finally {
          Object.assign(proxy!.state, { dropMatching: "", drops: 0 });
        }
        // Within the time budget the chain says it landed (success); otherwise
        // it is followed by its hash (pending): never a failure.
        assert.ok(
          first.success || first.errorReason === "settlement_pending",
          JSON.stringify(first),
        );
        assert.notEqual(first.transaction, "", "the answer names the transaction");
        await until("the payment to land", async () =>
          (await family.balanceOf(stack, payTo())) === before.payTo + c.price ? true : undefined,
        );

        // Presented again: its success if the first could only say pending, else a replay.
        const again = await settle(payload, requirements);
        const answers = [first, again];
        assert.equal(answers.filter((a) => a.success).length, 1, JSON.stringify(answers));
        if (first.success) {
          assert.deepEqual([again.errorReason, again.transaction], [family.reasons.replay, ""]);
        } else {
          assert.equal(again.transaction, first.transaction, "the one transaction sent");
        }
        const paid = answers.find((a) => a.success)!;
        const fee = (await family.payerFee?.(stack, paid.transaction)) ?? 0n;
        assert.deepEqual(await balances(payer), {
          payer: before.payer - c.price - fee,
          payTo: before.payTo + c.price,
        });
        const rows = await rowsOf(payer, c.price);
        assert.deepEqual(
          rows.map((r) => [r.status, r.transaction]),
          [["succeeded", paid.transaction]],
        );
        assert.deepEqual(
          await transactionsOf(rows[0]!.id),
          [paid.transaction],
          "one transaction was ever sent",
        );
      });
    }
  });
}
