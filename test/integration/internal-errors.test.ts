/**
 * Spec section 7, the 500 rows: when the service itself fails (here, its
 * database goes away under it), /verify, /settle and the discovery reads
 * answer 500 with the JSON error envelope: no stack trace, no internals,
 * a request id to quote. The process keeps serving what does not need the
 * database.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Hex } from "viem";
import { startStack, type TestStack } from "../support/stack.js";
import { requirementsFor, signPayment, usdcBalance } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";

const PAY_TO = "0x7171717171717171717171717171717171717171" as Hex;

describe("internal errors are a clean 500", () => {
  let stack: TestStack;
  let freshKey: string;
  before(async () => {
    stack = await startStack();
    // A key never used before, so nothing about it is cached in memory.
    freshKey = (await createApiKey(stack.service.db, stack.accountId, "never-used")).key;
  });
  after(async () => {
    await stack.stop().catch(() => {});
  });

  async function expectInternalError(res: Response): Promise<void> {
    assert.equal(res.status, 500);
    const text = await res.text();
    const body = JSON.parse(text) as Record<string, unknown>;
    assert.deepEqual(Object.keys(body).sort(), ["error", "message", "requestId"]);
    assert.equal(body["error"], "internal_error");
    assert.equal(body["requestId"], res.headers.get("x-request-id"));
    assert.doesNotMatch(text, /\bat .+:\d+|node_modules|kysely|destroyed|Error:/);
  }

  test("7: /verify, /settle, /discovery/resources and /discovery/search answer 500 with the envelope", async () => {
    const requirements = requirementsFor({
      network: stack.network,
      usdc: stack.usdc,
      payTo: PAY_TO,
      amount: "1000",
    });
    const body = {
      x402Version: 2,
      paymentPayload: await signPayment(stack.payerKeys[0]!, requirements),
      paymentRequirements: requirements,
    };
    const paidBefore = await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO);

    // The database goes away under the running service.
    await stack.service.db.destroy();

    await expectInternalError(await post(stack.url, "/verify", body, freshKey));
    await expectInternalError(await post(stack.url, "/settle", body, freshKey));
    await expectInternalError(
      await fetch(`${stack.url}/discovery/resources?limit=7&offset=3&type=http`),
    );
    await expectInternalError(
      await fetch(`${stack.url}/discovery/search?query=never-asked-before`),
    );

    assert.equal(
      await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO),
      paidBefore,
      "nothing was settled",
    );
    const supported = await fetch(`${stack.url}/supported`);
    assert.equal(supported.status, 200, "the process is still serving");
  });
});
