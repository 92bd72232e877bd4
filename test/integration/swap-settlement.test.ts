/**
 * Swap settlement is announced as experimental and not available: nothing
 * advertises it and a payment that asks for it is refused like any other
 * unsupported scheme, moving nothing and sending nothing.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { privateKeyToAccount } from "viem/accounts";
import type { Hex } from "viem";
import { startStack, type TestStack } from "../support/stack.js";
import { requirementsFor, signPayment, usdcBalance } from "../chains/evm/payments.js";
import { post } from "../support/http.js";

const PAY_TO = "0x2222222222222222222222222222222222222222" as Hex;

describe("swap settlement is not offered", () => {
  let stack: TestStack;
  before(async () => {
    stack = await startStack();
  });
  after(() => stack.stop());

  test("GET /supported lists no swap scheme or extension", async () => {
    const supported = (await (await fetch(`${stack.url}/supported`)).json()) as {
      kinds: { scheme: string; network: string }[];
      extensions: string[];
    };
    assert.ok(supported.kinds.length > 0, "kinds are listed");
    assert.deepEqual(
      supported.kinds.filter((k) => /swap/i.test(k.scheme)),
      [],
    );
    assert.deepEqual(
      supported.extensions.filter((e) => /swap/i.test(e)),
      [],
    );
  });

  test("a payment asking for a swap scheme: 200 unsupported_scheme on /verify and /settle, nothing moves or is sent", async () => {
    const payerKey = stack.payerKeys[0]!;
    const payer = privateKeyToAccount(payerKey).address;
    const honest = requirementsFor({ network: stack.network, usdc: stack.usdc, payTo: PAY_TO });
    const requirements = { ...honest, scheme: "swap" };
    const signed = await signPayment(payerKey, honest);
    const body = {
      x402Version: 2,
      paymentPayload: { ...signed, accepted: requirements },
      paymentRequirements: requirements,
    };
    const payerBefore = await usdcBalance(stack.rpcUrl, stack.usdc, payer);

    const verifyRes = await post(stack.url, "/verify", body, stack.apiKey);
    assert.equal(verifyRes.status, 200);
    const verified = (await verifyRes.json()) as {
      isValid: boolean;
      invalidReason?: string;
      invalidMessage?: string;
    };
    assert.equal(verified.isValid, false);
    assert.equal(verified.invalidReason, "unsupported_scheme");
    assert.match(verified.invalidMessage ?? "", /experimental and not available/);

    const settleRes = await post(stack.url, "/settle", body, stack.apiKey);
    assert.equal(settleRes.status, 200);
    const settled = (await settleRes.json()) as {
      success: boolean;
      errorReason?: string;
      transaction: string;
    };
    assert.deepEqual(
      [settled.success, settled.errorReason, settled.transaction],
      [false, "unsupported_scheme", ""],
    );

    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payer), payerBefore);
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO), 0n);
    // Every settle attempt is recorded: this one as failed, with nothing sent.
    const rows = await stack.service.db
      .selectFrom("settlements")
      .select(["status", "error_reason", "transaction"])
      .where("payer", "=", payer.toLowerCase())
      .execute();
    assert.deepEqual(rows, [
      { status: "failed", error_reason: "unsupported_scheme", transaction: null },
    ]);
    const sent = await stack.service.db
      .selectFrom("settlement_transactions")
      .select("reference")
      .execute();
    assert.deepEqual(sent, []);
  });
});
