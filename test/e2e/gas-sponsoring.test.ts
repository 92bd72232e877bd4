/**
 * `eip2612GasSponsoring`, end to end: a payer who holds USDC but no ETH, and
 * has never approved Permit2, pays for a resource priced in USDC through
 * Permit2, with `exact` and with `upto`. The official client signs an
 * EIP-2612 permit for Permit2 next to its Permit2 authorization; this
 * service's settle spends both in one transaction (the proxy's
 * `settleWithPermit`) and pays the gas. The payer never sends a transaction:
 * its ETH and nonce stay zero, and its EIP-2612 permit nonce shows the permit
 * was spent.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { paymentMiddleware, setSettlementOverrides } from "@x402/express";
import { x402ResourceServer } from "@x402/core/server";
import { x402Client, x402HTTPClient } from "@x402/core/client";
import { ExactEvmScheme as ExactEvmServerScheme } from "@x402/evm/exact/server";
import { ExactEvmScheme as ExactEvmClientScheme } from "@x402/evm/exact/client";
import { UptoEvmScheme as UptoEvmServerScheme } from "@x402/evm/upto/server";
import { UptoEvmScheme as UptoEvmClientScheme } from "@x402/evm/upto/client";
import {
  PERMIT2_ADDRESS,
  toClientEvmSigner,
  x402ExactPermit2ProxyABI,
  x402ExactPermit2ProxyAddress,
  x402UptoPermit2ProxyABI,
  x402UptoPermit2ProxyAddress,
} from "@x402/evm";
import { declareEip2612GasSponsoringExtension } from "@x402/extensions";
import { wrapFetchWithPayment } from "@x402/fetch";
import {
  createPublicClient,
  decodeFunctionData,
  erc20Abi,
  http,
  parseAbi,
  type Address,
  type Hex,
  type PublicClient,
} from "viem";
import { facilitatorClient, listenOnLoopback, type Listening } from "../support/resourceServer.js";
import { newPayerWithoutGas } from "../chains/evm/devnetChain.js";
import { startStack, type TestStack } from "../support/stack.js";
import { usdcBalance } from "../chains/evm/payments.js";

const NETWORK = "eip155:8453";
const PAY_TO = "0x0000000000000000000000000000000000005a5a" as const;
const PRICE = 3_000n; // $0.003, the exact price and the upto maximum
const USED = 1_200n; // what the metered request turned out to cost

describe("eip2612GasSponsoring: a payer with no gas onboards to Permit2", () => {
  let stack: TestStack;
  let server: Listening | undefined;
  let origin: string;
  let publicClient: PublicClient;

  before(async () => {
    stack = await startStack({ networks: [NETWORK] });
    publicClient = createPublicClient({ transport: http(stack.rpcUrl) });
    const facilitator = facilitatorClient(stack);
    const resourceServer = new x402ResourceServer(facilitator)
      .register(NETWORK, new ExactEvmServerScheme())
      .register(NETWORK, new UptoEvmServerScheme());
    const app = express();
    app.use(
      paymentMiddleware(
        {
          "GET /data": {
            accepts: {
              scheme: "exact",
              network: NETWORK,
              payTo: PAY_TO,
              price: {
                amount: PRICE.toString(),
                asset: stack.usdc,
                extra: { assetTransferMethod: "permit2", name: "USD Coin", version: "2" },
              },
            },
            description: "Data paid in USDC through Permit2, gas sponsored",
            mimeType: "application/json",
            extensions: { ...declareEip2612GasSponsoringExtension() },
          },
          "GET /metered": {
            accepts: { scheme: "upto", network: NETWORK, payTo: PAY_TO, price: "$0.003" },
            description: "Metered, billed by use up to $0.003, gas sponsored",
            mimeType: "application/json",
            extensions: { ...declareEip2612GasSponsoringExtension() },
          },
        },
        resourceServer,
      ),
    );
    app.get("/data", (_req, res) => res.json({ data: "ok" }));
    app.get("/metered", (_req, res) => {
      setSettlementOverrides(res, { amount: USED.toString() });
      res.json({ data: "ok" });
    });
    server = await listenOnLoopback(app);
    origin = server.origin;
  });

  after(async () => {
    await server?.close();
    await stack?.stop();
  });

  /** A brand-new payer: USDC from a devnet payer, no ETH at all, no Permit2 approval. */
  async function freshPayer() {
    const payer = await newPayerWithoutGas(stack, stack.usdc, 100_000n);
    const allowance = () =>
      publicClient.readContract({
        address: stack.usdc,
        abi: erc20Abi,
        functionName: "allowance",
        args: [payer.address, PERMIT2_ADDRESS],
      });
    assert.equal(await allowance(), 0n, "no Permit2 approval yet");
    const permitNonce = () =>
      publicClient.readContract({
        address: stack.usdc,
        abi: parseAbi(["function nonces(address) view returns (uint256)"]),
        functionName: "nonces",
        args: [payer.address],
      });
    return { payer, allowance, permitNonce };
  }

  /** The payer sent nothing and holds no ETH: the service paid all the gas. */
  async function assertPaidNoGas(payer: Address): Promise<void> {
    assert.equal(await publicClient.getBalance({ address: payer }), 0n, "payer paid no gas");
    assert.equal(await publicClient.getTransactionCount({ address: payer }), 0);
  }

  test("exact: a fresh payer with USDC and 0 ETH pays; permit and transfer in one sponsored transaction", async () => {
    const { payer, allowance, permitNonce } = await freshPayer();
    const payToBefore = await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO);

    const client = new x402Client().register(
      "eip155:*",
      new ExactEvmClientScheme(toClientEvmSigner(payer, publicClient)),
    );
    const res = await wrapFetchWithPayment(fetch, client)(`${origin}/data`);
    assert.equal(res.status, 200, await res.clone().text());
    const receipt = new x402HTTPClient(client).getPaymentSettleResponse((n) => res.headers.get(n));
    assert.equal(receipt.success, true);

    const tx = await publicClient.getTransaction({ hash: receipt.transaction as Hex });
    assert.equal(tx.to?.toLowerCase(), x402ExactPermit2ProxyAddress.toLowerCase());
    assert.equal(
      decodeFunctionData({ abi: x402ExactPermit2ProxyABI, data: tx.input }).functionName,
      "settleWithPermit",
    );

    // The permit was spent on-chain (its nonce moved) and approved exactly
    // the payment, which Permit2 then used up.
    assert.equal(await permitNonce(), 1n, "the payer's EIP-2612 permit was used");
    assert.equal(await allowance(), 0n);
    await assertPaidNoGas(payer.address);
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payer.address), 100_000n - PRICE);
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO), payToBefore + PRICE);

    const row = await stack.service.db
      .selectFrom("settlements")
      .selectAll()
      .where("transaction", "=", receipt.transaction)
      .executeTakeFirstOrThrow();
    assert.equal(row.status, "succeeded");
    assert.equal(row.payer, payer.address.toLowerCase());
    assert.equal(row.amount, PRICE.toString());
  });

  test("upto: a fresh payer with 0 ETH signs a maximum; the sponsored permit approves it and only the amount used moves", async () => {
    const { payer, allowance, permitNonce } = await freshPayer();
    const payToBefore = await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO);

    const client = new x402Client().register(
      "eip155:*",
      new UptoEvmClientScheme(toClientEvmSigner(payer, publicClient)),
    );
    const res = await wrapFetchWithPayment(fetch, client)(`${origin}/metered`);
    assert.equal(res.status, 200, await res.clone().text());
    const receipt = new x402HTTPClient(client).getPaymentSettleResponse((n) => res.headers.get(n));
    assert.equal(receipt.success, true);
    assert.equal(receipt.amount, USED.toString());

    const tx = await publicClient.getTransaction({ hash: receipt.transaction as Hex });
    assert.equal(tx.to?.toLowerCase(), x402UptoPermit2ProxyAddress.toLowerCase());
    assert.equal(
      decodeFunctionData({ abi: x402UptoPermit2ProxyABI, data: tx.input }).functionName,
      "settleWithPermit",
    );
    assert.equal(await permitNonce(), 1n, "the payer's EIP-2612 permit was used");
    // The permit approved the signed maximum; Permit2 took only what was used.
    assert.equal(await allowance(), PRICE - USED);
    await assertPaidNoGas(payer.address);
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payer.address), 100_000n - USED);
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO), payToBefore + USED);
  });
});
