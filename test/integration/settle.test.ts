/**
 * /settle against a real chain: the money moves once, every attempt leaves a
 * row, and a failure is `success: false` with a reason and an empty
 * transaction.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { startStack, type TestStack } from "../support/stack.js";
import { requirementsFor, signPayment, usdcBalance } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { nowSeconds, signAuthorization } from "../chains/evm/authorization.js";
import { availableBackends } from "../support/database.js";

const PAY_TO = "0x3333333333333333333333333333333333333333" as Hex;

interface Settle {
  success: boolean;
  transaction: string;
  network: string;
  payer?: string;
  errorReason?: string;
  errorMessage?: string;
}

for (const backend of availableBackends()) {
  describe(`POST /settle (${backend})`, () => {
    let stack: TestStack;
    before(async () => {
      stack = await startStack({ backend });
    });
    after(() => stack.stop());

    const reqs = () => requirementsFor({ network: stack.network, usdc: stack.usdc, payTo: PAY_TO });
    const rows = () =>
      stack.service.db.selectFrom("settlements").selectAll().orderBy("started_at").execute();

    test("settles once; a replay of the same payment is refused and moves nothing", async () => {
      const payerKey = stack.payerKeys[3]!;
      const payer = privateKeyToAccount(payerKey).address;
      const requirements = reqs();
      const body = {
        x402Version: 2,
        paymentPayload: await signPayment(payerKey, requirements),
        paymentRequirements: requirements,
      };
      const payerBefore = await usdcBalance(stack.rpcUrl, stack.usdc, payer);
      const toBefore = await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO);

      const first = (await (await post(stack.url, "/settle", body, stack.apiKey)).json()) as Settle;
      assert.equal(first.success, true);
      assert.equal(first.network, stack.network);
      assert.equal(first.payer, payer);
      assert.match(first.transaction, /^0x[0-9a-f]{64}$/);

      // The same signed payment again: refused as a replay (its one success
      // was answered), nothing is sent.
      const again = await post(stack.url, "/settle", body, stack.apiKey);
      assert.equal(again.status, 200);
      const second = (await again.json()) as Settle;
      assert.equal(second.success, false);
      assert.equal(second.transaction, "");
      assert.equal(
        (second as Settle & { errorReason?: string }).errorReason,
        "invalid_exact_evm_nonce_already_used",
      );

      assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payer), payerBefore - 10000n);
      assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO), toBefore + 10000n);

      const recorded = (await rows()).filter((r) => r.payer === payer.toLowerCase());
      assert.deepEqual(
        recorded.map((r) => [r.status, r.transaction, r.error_reason, r.attempts]),
        [["succeeded", first.transaction, null, 2]],
        "one record for one authorization, counting both requests",
      );
    });

    test("a payload claiming another network: refused, and the answer names the requirements' network", async () => {
      const requirements = reqs();
      const payload = await signPayment(stack.payerKeys[0]!, requirements);
      const body = {
        x402Version: 2,
        paymentPayload: { ...payload, accepted: { ...payload.accepted, network: "eip155:10" } },
        paymentRequirements: requirements,
      };
      const res = (await (await post(stack.url, "/settle", body, stack.apiKey)).json()) as Settle;
      assert.equal(res.success, false);
      assert.equal(
        res.network,
        stack.network,
        "the requirements' network, not the payload's claim",
      );
    });

    test("an expired authorization is refused before anything is sent, and recorded", async () => {
      const payerKey = stack.payerKeys[4]!;
      const requirements = reqs();
      const payload = await signAuthorization(payerKey, requirements, {
        to: PAY_TO,
        value: 10000n,
        validAfter: 0n,
        validBefore: nowSeconds() - 1n,
      });
      const res = await post(
        stack.url,
        "/settle",
        { x402Version: 2, paymentPayload: payload, paymentRequirements: requirements },
        stack.apiKey,
      );
      assert.equal(res.status, 200);
      const body = (await res.json()) as Settle;
      assert.deepEqual(
        {
          success: body.success,
          transaction: body.transaction,
          errorReason: body.errorReason,
          network: body.network,
        },
        {
          success: false,
          transaction: "",
          errorReason: "invalid_exact_evm_payload_authorization_valid_before",
          network: stack.network,
        },
      );
      const row = (await rows()).at(-1)!;
      assert.equal(row.status, "failed");
      assert.equal(row.error_reason, "invalid_exact_evm_payload_authorization_valid_before");
      assert.equal(row.transaction, null);
      assert.equal(row.api_key_id !== null, true);
      // A final row keeps the payment's facts, not its signature: a signed
      // authorization of a failed settle cannot be lifted from the database.
      const stored = row.request as {
        paymentPayload: { payload: { authorization: { from: string }; signature?: string } };
        paymentRequirements: { amount: string };
      };
      assert.equal(stored.paymentPayload.payload.signature, undefined);
      assert.equal(
        stored.paymentPayload.payload.authorization.from,
        privateKeyToAccount(payerKey).address,
      );
      assert.equal(stored.paymentRequirements.amount, requirements.amount);
    });

    test("an unsupported network is a recorded failure with a reason", async () => {
      const requirements = { ...reqs(), network: "eip155:1" as const };
      const payload = await signPayment(stack.payerKeys[4]!, requirements);
      const body = (await (
        await post(
          stack.url,
          "/settle",
          { x402Version: 2, paymentPayload: payload, paymentRequirements: requirements },
          stack.apiKey,
        )
      ).json()) as Settle;
      assert.equal(body.success, false);
      assert.equal(body.errorReason, "invalid_network");
      assert.equal(body.transaction, "");
      assert.equal(body.network, "eip155:1");
      const row = (await rows()).at(-1)!;
      assert.equal(row.network, "eip155:1");
      assert.equal(row.status, "failed");
    });
  });
}
