/**
 * `exact` through Permit2, end to end, for a token without EIP-3009 or
 * EIP-2612: USDG on eip155:4663. A resource server on the official
 * `@x402/express` middleware with `HTTPFacilitatorClient` pointed at this
 * service asks for USDG with `extra.assetTransferMethod: "permit2"`; an
 * official `@x402/fetch` client holding a devnet payer key, after its one-time
 * `approve(Permit2, max)`, pays. The money is checked on-chain and the
 * settlement row in the database.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { paymentMiddleware } from "@x402/express";
import { HTTPFacilitatorClient, x402ResourceServer } from "@x402/core/server";
import { x402Client, x402HTTPClient } from "@x402/core/client";
import { ExactEvmScheme as ExactEvmServerScheme } from "@x402/evm/exact/server";
import { ExactEvmScheme as ExactEvmClientScheme } from "@x402/evm/exact/client";
import { PERMIT2_ADDRESS, x402ExactPermit2ProxyAddress } from "@x402/evm";
import { wrapFetchWithPayment } from "@x402/fetch";
import { privateKeyToAccount } from "viem/accounts";
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  erc20Abi,
  http,
  maxUint256,
  type Hex,
} from "viem";
import { facilitatorClient, listenOnLoopback, type Listening } from "../support/resourceServer.js";
import { startStack, type TestStack } from "../support/stack.js";
import { availableBackends } from "../support/database.js";
import { usdcBalance as tokenBalance } from "../chains/evm/payments.js";

const NETWORK = "eip155:4663";
const USDG = "0xe343167631d89B6Ffc58B88d6b7fB0228795491D" as const;
const PAY_TO = "0x000000000000000000000000000000000000dEaD" as const;
const PRICE_ATOMIC = 2500n; // 0.0025 USDG (6 decimals)

for (const backend of availableBackends()) {
  describe(`exact through Permit2, USDG on eip155:4663 (${backend})`, () => {
    let stack: TestStack;
    let server: Listening | undefined;
    let resourceUrl: string;

    before(async () => {
      stack = await startStack({ backend, networks: [NETWORK] });
      const facilitator = facilitatorClient(stack);
      const resourceServer = new x402ResourceServer(facilitator).register(
        NETWORK,
        new ExactEvmServerScheme(),
      );
      const app = express();
      app.use(
        paymentMiddleware(
          {
            "GET /report": {
              accepts: {
                scheme: "exact",
                network: NETWORK,
                payTo: PAY_TO,
                // USDG is not among @x402/evm's default assets, so the price
                // names the token and how it moves.
                price: {
                  amount: PRICE_ATOMIC.toString(),
                  asset: USDG,
                  extra: { assetTransferMethod: "permit2", name: "Global Dollar", version: "1" },
                },
              },
              description: "Report paid in USDG",
              mimeType: "application/json",
            },
          },
          resourceServer,
        ),
      );
      app.get("/report", (_req, res) => {
        res.json({ report: "ok" });
      });
      server = await listenOnLoopback(app);
      resourceUrl = `${server.origin}/report`;
    });

    after(async () => {
      await server?.close();
      await stack?.stop();
    });

    test("the stack serves USDG at its canonical address and /supported lists eip155:4663 exact", async () => {
      assert.equal(stack.assets["USDG"], USDG);
      const supported = await new HTTPFacilitatorClient({ url: stack.url }).getSupported();
      assert.ok(
        supported.kinds.some(
          (k) => k.network === NETWORK && k.scheme === "exact" && k.x402Version === 2,
        ),
      );
    });

    test("an unpaid request gets 402 naming USDG and the Permit2 transfer method", async () => {
      const res = await fetch(resourceUrl);
      assert.equal(res.status, 402);
      const required = new x402HTTPClient(new x402Client()).getPaymentRequiredResponse(
        (name) => res.headers.get(name),
        await res.json().catch(() => undefined),
      );
      const accept = required.accepts[0]!;
      assert.equal(accept.network, NETWORK);
      assert.equal(accept.asset.toLowerCase(), USDG.toLowerCase());
      assert.equal(accept.amount, PRICE_ATOMIC.toString());
      assert.equal(accept.extra?.["assetTransferMethod"], "permit2");
    });

    test("approve Permit2 once, then 402 → pay → 200 moves exactly the price", async () => {
      const payerKey = stack.payerKeys[0] as Hex;
      const payer = privateKeyToAccount(payerKey);
      const chain = defineChain({
        id: 4663,
        name: "USDG chain (devnet)",
        nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
        rpcUrls: { default: { http: [stack.rpcUrl] } },
      });
      const publicClient = createPublicClient({ chain, transport: http(stack.rpcUrl) });

      // The payer's one-time approval of Permit2 on the token.
      const allowance = await publicClient.readContract({
        address: USDG,
        abi: erc20Abi,
        functionName: "allowance",
        args: [payer.address, PERMIT2_ADDRESS],
      });
      if (allowance < PRICE_ATOMIC) {
        const wallet = createWalletClient({ account: payer, chain, transport: http(stack.rpcUrl) });
        const hash = await wallet.writeContract({
          address: USDG,
          abi: erc20Abi,
          functionName: "approve",
          args: [PERMIT2_ADDRESS, maxUint256],
        });
        const approval = await publicClient.waitForTransactionReceipt({ hash });
        assert.equal(approval.status, "success");
      }

      const payerBefore = await tokenBalance(stack.rpcUrl, USDG, payer.address);
      const payToBefore = await tokenBalance(stack.rpcUrl, USDG, PAY_TO);

      // USDG is not an @x402/evm default asset: the payer opts in to it
      // (with a cap), as a real client must.
      const client = new x402Client()
        .register("eip155:*", new ExactEvmClientScheme(payer))
        .setSpendControls({
          allowedAssets: [{ network: NETWORK, asset: USDG, maxAmountPerPayment: "10000" }],
        });
      const res = await wrapFetchWithPayment(fetch, client)(resourceUrl);
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), { report: "ok" });

      const receipt = new x402HTTPClient(client).getPaymentSettleResponse((n) =>
        res.headers.get(n),
      );
      assert.equal(receipt.success, true);
      assert.match(receipt.transaction, /^0x[0-9a-f]{64}$/);

      // The settlement went through the x402 exact Permit2 proxy.
      const tx = await publicClient.getTransaction({ hash: receipt.transaction as Hex });
      assert.equal(tx.to?.toLowerCase(), x402ExactPermit2ProxyAddress.toLowerCase());

      assert.equal(
        await tokenBalance(stack.rpcUrl, USDG, payer.address),
        payerBefore - PRICE_ATOMIC,
      );
      assert.equal(await tokenBalance(stack.rpcUrl, USDG, PAY_TO), payToBefore + PRICE_ATOMIC);

      const rows = await stack.service.db.selectFrom("settlements").selectAll().execute();
      const row = rows.find((r) => r.transaction === receipt.transaction);
      assert.ok(row, "settlement row recorded with the transaction hash");
      assert.equal(row.status, "succeeded");
      assert.equal(row.network, NETWORK);
      assert.equal(row.scheme, "exact");
      assert.equal(row.payer, payer.address.toLowerCase());
      assert.equal(row.pay_to, PAY_TO.toLowerCase());
      assert.equal(row.amount, PRICE_ATOMIC.toString());
      assert.equal(row.account_id, stack.accountId);
    });
  });
}
