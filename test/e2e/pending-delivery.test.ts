/**
 * A payment that could only be answered `settlement_pending` is delivered
 * once, not lost and not twice, through the official `@x402/express`
 * middleware and `HTTPFacilitatorClient` unmodified.
 *
 * The chain is held (anvil's automine off) so that "not mined within the
 * settle budget" is a fact the test controls: the first request gets 402
 * (its settle, and the middleware's one retry of it, say pending); once the
 * block is mined, the same payment header sent again gets the resource
 * (200); any later copy of the header gets 402. The recipient is paid once,
 * and the settlement records which request was answered success.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { paymentMiddleware } from "@x402/express";
import { x402ResourceServer } from "@x402/core/server";
import { x402Client, x402HTTPClient } from "@x402/core/client";
import { ExactEvmScheme as ExactEvmServerScheme } from "@x402/evm/exact/server";
import { ExactEvmScheme as ExactEvmClientScheme } from "@x402/evm/exact/client";
import { createPublicClient, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { facilitatorClient, listenOnLoopback, type Listening } from "../support/resourceServer.js";
import { startStack, type TestStack } from "../support/stack.js";
import { usdcBalance } from "../chains/evm/payments.js";

const NETWORK = "eip155:8453";
const PAY_TO = "0x000000000000000000000000000000000000d00d" as const;

describe("a pending payment is delivered once through the official middleware", () => {
  let stack: TestStack;
  let server: Listening | undefined;
  let resourceUrl: string;

  before(async () => {
    stack = await startStack({
      networks: [NETWORK],
      env: { SETTLE_TIMEOUT_MS: "1000", RECONCILE_AFTER_MS: "600000" },
    });
    const resourceServer = new x402ResourceServer(facilitatorClient(stack)).register(
      NETWORK,
      new ExactEvmServerScheme(),
    );
    const app = express();
    app.use(
      paymentMiddleware(
        {
          "GET /report": {
            accepts: { scheme: "exact", price: "$0.003", network: NETWORK, payTo: PAY_TO },
            description: "A report",
            mimeType: "application/json",
          },
        },
        resourceServer,
      ),
    );
    app.get("/report", (_req, res) => {
      res.json({ report: "ready" });
    });
    server = await listenOnLoopback(app);
    resourceUrl = `${server.origin}/report`;
  });
  after(async () => {
    await server?.close();
    await stack.stop();
  });

  test("402 while pending, 200 once mined for the same header, 402 for any later copy; paid once", async () => {
    const rpc = createPublicClient({ transport: http(stack.rpcUrl) });
    const automine = (on: boolean) =>
      rpc.request({ method: "evm_setAutomine" as never, params: [on] as never });
    const payer = privateKeyToAccount(stack.payerKeys[0]!);
    const client = new x402Client().register("eip155:*", new ExactEvmClientScheme(payer));
    const httpClient = new x402HTTPClient(client);
    const unpaid = await fetch(resourceUrl);
    assert.equal(unpaid.status, 402);
    const required = httpClient.getPaymentRequiredResponse(
      (n) => unpaid.headers.get(n),
      await unpaid.json().catch(() => undefined),
    );
    const header = httpClient.encodePaymentSignatureHeader(
      await httpClient.createPaymentPayload(required),
    );
    const payToBefore = await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO);

    await automine(false);
    let first: Response;
    try {
      first = await fetch(resourceUrl, { headers: header });
      await rpc.request({ method: "evm_mine" as never, params: [] as never });
    } finally {
      await automine(true);
    }
    assert.equal(first.status, 402, "not mined within the settle budget: no delivery yet");
    const rows = await stack.service.db
      .selectFrom("settlements")
      .selectAll()
      .where("pay_to", "=", PAY_TO.toLowerCase())
      .execute();
    assert.deepEqual(
      rows.map((r) => [r.status, r.success_answered_at]),
      [["pending", null]],
    );

    const second = await fetch(resourceUrl, { headers: header });
    assert.equal(second.status, 200, await second.clone().text());
    assert.deepEqual(await second.json(), { report: "ready" });
    const receipt = httpClient.getPaymentSettleResponse((n) => second.headers.get(n));
    assert.equal(receipt.success, true);
    assert.equal(receipt.transaction, rows[0]!.transaction);

    const third = await fetch(resourceUrl, { headers: header });
    assert.equal(third.status, 402, "the one delivery was made: a later copy is not paid again");

    assert.equal(
      await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO),
      payToBefore + 3000n,
      "paid once",
    );
    const row = await stack.service.db
      .selectFrom("settlements")
      .select(["status", "success_answered_at", "success_request_id"])
      .where("id", "=", rows[0]!.id)
      .executeTakeFirstOrThrow();
    assert.equal(row.status, "succeeded");
    assert.ok(
      row.success_answered_at && row.success_request_id,
      "the answered request is recorded",
    );
  });
});
