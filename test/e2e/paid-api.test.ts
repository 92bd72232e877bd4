/**
 * The promise to resource servers: swap only the facilitator client.
 *
 * A resource server built with the official `@x402/express` middleware and
 * `HTTPFacilitatorClient` pointed at this service is paid by an official
 * `@x402/fetch` client holding a devnet payer key. The test checks the money
 * on-chain and the settlement row, on every database backend available.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { paymentMiddleware } from "@x402/express";
import { HTTPFacilitatorClient, x402ResourceServer } from "@x402/core/server";
import { x402Client, x402HTTPClient } from "@x402/core/client";
import { ExactEvmScheme as ExactEvmServerScheme } from "@x402/evm/exact/server";
import { ExactEvmScheme as ExactEvmClientScheme } from "@x402/evm/exact/client";
import { wrapFetchWithPayment } from "@x402/fetch";
import { privateKeyToAccount } from "viem/accounts";
import type { Hex } from "viem";
import { facilitatorClient, listenOnLoopback, type Listening } from "../support/resourceServer.js";
import { startStack, type TestStack } from "../support/stack.js";
import { availableBackends } from "../support/database.js";
import { usdcBalance } from "../chains/evm/payments.js";

const PAY_TO = "0x000000000000000000000000000000000000dEaD" as const;
const PRICE_ATOMIC = 1000n; // $0.001 in USDC's 6 decimals

for (const backend of availableBackends()) {
  describe(`paid API end to end (${backend})`, () => {
    let stack: TestStack;
    let server: Listening | undefined;
    let resourceUrl: string;

    before(async () => {
      stack = await startStack({ backend });
      const facilitator = facilitatorClient(stack);
      const resourceServer = new x402ResourceServer(facilitator).register(
        "eip155:8453",
        new ExactEvmServerScheme(),
      );
      const app = express();
      app.use(
        paymentMiddleware(
          {
            "GET /weather": {
              accepts: { scheme: "exact", price: "$0.001", network: "eip155:8453", payTo: PAY_TO },
              description: "Weather report",
              mimeType: "application/json",
            },
          },
          resourceServer,
        ),
      );
      app.get("/weather", (_req, res) => {
        res.json({ forecast: "sunny" });
      });
      server = await listenOnLoopback(app);
      resourceUrl = `${server.origin}/weather`;
    });

    after(async () => {
      await server?.close();
      await stack.stop();
    });

    test("an unpaid request gets 402 with requirements naming this network and USDC", async () => {
      const res = await fetch(resourceUrl);
      assert.equal(res.status, 402);
      const header = res.headers.get("payment-required");
      assert.ok(header, "PAYMENT-REQUIRED header present");
      const required = new x402HTTPClient(new x402Client()).getPaymentRequiredResponse(
        (name) => res.headers.get(name),
        await res.json().catch(() => undefined),
      );
      const accept = required.accepts[0]!;
      assert.equal(accept.network, "eip155:8453");
      assert.equal(accept.asset.toLowerCase(), stack.usdc.toLowerCase());
      assert.equal(accept.amount, PRICE_ATOMIC.toString());
    });

    test("402 → pay → 200 moves exactly the price and records the settlement", async () => {
      const payerKey = stack.payerKeys[0]!;
      const payer = privateKeyToAccount(payerKey);
      const payerBefore = await usdcBalance(stack.rpcUrl, stack.usdc, payer.address);
      const payToBefore = await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO);

      const client = new x402Client().register("eip155:*", new ExactEvmClientScheme(payer));
      const payingFetch = wrapFetchWithPayment(fetch, client);
      const res = await payingFetch(resourceUrl);
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), { forecast: "sunny" });

      const receipt = new x402HTTPClient(client).getPaymentSettleResponse((n) =>
        res.headers.get(n),
      );
      assert.equal(receipt.success, true);
      assert.match(receipt.transaction, /^0x[0-9a-f]{64}$/);

      assert.equal(
        await usdcBalance(stack.rpcUrl, stack.usdc, payer.address),
        payerBefore - PRICE_ATOMIC,
      );
      assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO), payToBefore + PRICE_ATOMIC);

      const rows = await stack.service.db.selectFrom("settlements").selectAll().execute();
      const row = rows.find((r) => r.transaction === receipt.transaction);
      assert.ok(row, "settlement row recorded with the transaction hash");
      assert.equal(row.status, "succeeded");
      assert.equal(row.network, "eip155:8453");
      assert.equal(row.scheme, "exact");
      assert.equal(row.payer, payer.address.toLowerCase());
      assert.equal(row.pay_to, PAY_TO.toLowerCase());
      assert.equal(row.amount, PRICE_ATOMIC.toString());
      assert.equal(row.account_id, stack.accountId);
      assert.ok(row.finished_at && row.duration_ms !== null);
    });

    test("the facilitator client's getSupported reads /supported with signer addresses", async () => {
      const client = new HTTPFacilitatorClient({ url: stack.url });
      const supported = await client.getSupported();
      assert.ok(
        supported.kinds.some(
          (k) => k.network === "eip155:8453" && k.scheme === "exact" && k.x402Version === 2,
        ),
      );
      const signers = supported.signers["eip155"] ?? [];
      const expected = (stack.devnet.networks["eip155:8453"]!.facilitatorPrivateKeys as Hex[]).map(
        (k) => privateKeyToAccount(k).address,
      );
      assert.deepEqual([...signers].sort(), [...expected].sort());
    });
  });
}
