/**
 * ERC-8021 builder codes, end to end: a code declared by the resource server
 * (`a`), one sent by the client (`s`), or both, plus this service's own
 * (`w`, from BUILDER_CODE), are stamped onto the settlement calldata as a
 * Schema 2 suffix. The official `@x402/extensions/builder-code` server and
 * client extensions run unmodified. The test reads the mined transaction's
 * input: the suffix carries the codes, and the call before it is the same
 * transfer a payment without codes makes.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { paymentMiddleware } from "@x402/express";
import { x402ResourceServer } from "@x402/core/server";
import { x402Client, x402HTTPClient } from "@x402/core/client";
import { ExactEvmScheme as ExactEvmServerScheme } from "@x402/evm/exact/server";
import { ExactEvmScheme as ExactEvmClientScheme } from "@x402/evm/exact/client";
import { eip3009ABI } from "@x402/evm";
import {
  BUILDER_CODE,
  BuilderCodeClientExtension,
  builderCodeResourceServerExtension,
  declareBuilderCodeExtension,
  parseBuilderCodeSuffixFromCalldata,
} from "@x402/extensions/builder-code";
import { wrapFetchWithPayment } from "@x402/fetch";
import { privateKeyToAccount } from "viem/accounts";
import { createPublicClient, decodeFunctionData, http, type Hex, type PublicClient } from "viem";
import { facilitatorClient, listenOnLoopback, type Listening } from "../support/resourceServer.js";
import { startStack, type TestStack } from "../support/stack.js";
import { usdcBalance } from "../chains/evm/payments.js";

const NETWORK = "eip155:8453";
const PAY_TO = "0x000000000000000000000000000000000000b1dc" as const;
const PRICE = 1_000n; // $0.001

describe("ERC-8021 builder codes on the settlement calldata", () => {
  let stack: TestStack;
  let server: Listening | undefined;
  let base: string;
  let publicClient: PublicClient;

  before(async () => {
    stack = await startStack({
      networks: [NETWORK],
      payers: 4,
      env: { BUILDER_CODE: "bc_facilitator" },
    });
    publicClient = createPublicClient({ transport: http(stack.rpcUrl) });
    const facilitator = facilitatorClient(stack);
    const resourceServer = new x402ResourceServer(facilitator)
      .register(NETWORK, new ExactEvmServerScheme())
      .registerExtension(builderCodeResourceServerExtension);
    const accepts = {
      scheme: "exact",
      network: NETWORK as `${string}:${string}`,
      payTo: PAY_TO,
      price: "$0.001",
    };
    const app = express();
    app.use(
      paymentMiddleware(
        {
          "GET /attributed": {
            accepts,
            description: "declares the app's builder code",
            mimeType: "application/json",
            extensions: { [BUILDER_CODE]: declareBuilderCodeExtension("bc_weather_app") },
          },
          "GET /plain": { accepts, description: "no code", mimeType: "application/json" },
        },
        resourceServer,
      ),
    );
    app.get("/attributed", (_req, res) => res.json({ ok: true }));
    app.get("/plain", (_req, res) => res.json({ ok: true }));
    server = await listenOnLoopback(app);
    base = `${server.origin}`;
  });

  after(async () => {
    await server?.close();
    await stack?.stop();
  });

  /** Pays `path` with payer `i`, optionally sending a client code; returns the mined input. */
  async function pay(path: string, i: number, clientCode?: string) {
    const payer = privateKeyToAccount(stack.payerKeys[i]!);
    const client = new x402Client().register("eip155:*", new ExactEvmClientScheme(payer));
    if (clientCode) client.registerExtension(new BuilderCodeClientExtension(clientCode));
    const [payerBefore, payToBefore] = await Promise.all([
      usdcBalance(stack.rpcUrl, stack.usdc, payer.address),
      usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO),
    ]);
    const res = await wrapFetchWithPayment(fetch, client)(`${base}${path}`);
    assert.equal(res.status, 200, await res.clone().text());
    const receipt = new x402HTTPClient(client).getPaymentSettleResponse((n) => res.headers.get(n));
    assert.equal(receipt.success, true);
    // The transfer is exactly the price, whatever the attribution.
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payer.address), payerBefore - PRICE);
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO), payToBefore + PRICE);
    const tx = await publicClient.getTransaction({ hash: receipt.transaction as Hex });
    return { input: tx.input, payer: payer.address };
  }

  /** The call without the suffix decodes as the same EIP-3009 transfer. */
  function assertSameTransfer(input: Hex, payer: string): void {
    const suffixAt = input.toLowerCase().lastIndexOf("80218021802180218021802180218021");
    const codes = parseBuilderCodeSuffixFromCalldata(input);
    assert.ok(codes && suffixAt > 0);
    // The call's ABI encoding is a whole number of 32-byte words after the selector.
    const call = decodeFunctionData({ abi: eip3009ABI, data: input });
    assert.equal(call.functionName, "transferWithAuthorization");
    const [from, to, value] = call.args as unknown as readonly [string, string, bigint];
    assert.equal(from.toLowerCase(), payer.toLowerCase());
    assert.equal(to.toLowerCase(), PAY_TO);
    assert.equal(value, PRICE);
  }

  test("/supported advertises builder-code and eip2612GasSponsoring", async () => {
    const supported = (await (await fetch(`${stack.url}/supported`)).json()) as {
      extensions: string[];
    };
    assert.ok(supported.extensions.includes("builder-code"), supported.extensions.join());
    assert.ok(supported.extensions.includes("eip2612GasSponsoring"), supported.extensions.join());
  });

  test("resource server code only: a = app code, w = this service's code", async () => {
    const { input, payer } = await pay("/attributed", 0);
    const codes = parseBuilderCodeSuffixFromCalldata(input);
    assert.equal(codes?.a, "bc_weather_app");
    assert.equal(codes?.w, "bc_facilitator");
    assert.deepEqual(codes?.s ?? [], []);
    assertSameTransfer(input, payer);
  });

  test("client code only: s = client code, w = this service's code", async () => {
    const { input, payer } = await pay("/plain", 1, "bc_agent_sdk");
    const codes = parseBuilderCodeSuffixFromCalldata(input);
    assert.equal(codes?.a, undefined);
    assert.deepEqual(codes?.s, ["bc_agent_sdk"]);
    assert.equal(codes?.w, "bc_facilitator");
    assertSameTransfer(input, payer);
  });

  test("both: a, s and w all on the same settlement", async () => {
    const { input, payer } = await pay("/attributed", 2, "bc_agent_sdk");
    const codes = parseBuilderCodeSuffixFromCalldata(input);
    assert.equal(codes?.a, "bc_weather_app");
    assert.deepEqual(codes?.s, ["bc_agent_sdk"]);
    assert.equal(codes?.w, "bc_facilitator");
    assertSameTransfer(input, payer);
  });
});
