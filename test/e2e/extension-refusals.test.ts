/**
 * No extension turns a payment into an HTTP error. For every extension
 * `GET /supported` lists, on every EVM scheme it is offered with (`exact`
 * through Permit2, `upto`, a `batch-settlement` deposit through the Permit2
 * collector), the official client builds a payment carrying it, the
 * extension's part is then spoiled, and /verify and /settle answer HTTP 200
 * with the reason: `isValid: false` / `success: false` where the extension
 * refuses the payment, the bazaar's refusal in EXTENSION-RESPONSES, builder
 * codes that do not match the pattern dropped. The one exception is the
 * specification's own: a malformed `payment-identifier` is the caller's 400.
 * A refused settle sends nothing: the payer's nonce, gas and allowance stay.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { paymentMiddleware } from "@x402/express";
import { x402ResourceServer } from "@x402/core/server";
import { x402Client, x402HTTPClient } from "@x402/core/client";
import type { PaymentPayload } from "@x402/core/types";
import { PERMIT2_ADDRESS, toClientEvmSigner } from "@x402/evm";
import { ExactEvmScheme as ExactServer } from "@x402/evm/exact/server";
import { ExactEvmScheme as ExactClient } from "@x402/evm/exact/client";
import { UptoEvmScheme as UptoServer } from "@x402/evm/upto/server";
import { UptoEvmScheme as UptoClient } from "@x402/evm/upto/client";
import { BatchSettlementEvmScheme as BatchServer } from "@x402/evm/batch-settlement/server";
import { BatchSettlementEvmScheme as BatchClient } from "@x402/evm/batch-settlement/client";
import {
  declareEip2612GasSponsoringExtension,
  declareErc20ApprovalGasSponsoringExtension,
  EIP2612_GAS_SPONSORING,
  ERC20_APPROVAL_GAS_SPONSORING,
} from "@x402/extensions";
import { declareDiscoveryExtension } from "@x402/extensions/bazaar";
import type { PrivateKeyAccount } from "viem/accounts";
import {
  createPublicClient,
  encodeFunctionData,
  erc20Abi,
  http,
  maxUint256,
  parseTransaction,
  type Hex,
  type PublicClient,
} from "viem";
import { devnetBatchAuthorizerKey } from "../../devnet/evm/keys.js";
import { facilitatorClient, listenOnLoopback, type Listening } from "../support/resourceServer.js";
import { newPayerWithoutGas } from "../chains/evm/devnetChain.js";
import { startStack, type TestStack } from "../support/stack.js";

const NETWORK = "eip155:8453";
const CHAIN_ID = 8453;
const PAY_TO = "0x000000000000000000000000000000000000e7e7" as const;
const PRICE = 2_000n;
const SCHEMES = ["exact", "upto", "batch-settlement"] as const;
type Scheme = (typeof SCHEMES)[number];

interface Answer {
  status: number;
  body: Record<string, unknown>;
  headers: Headers;
}

describe("an extension's refusal is a 200 with a reason, on every scheme it is offered with", () => {
  let stack: TestStack;
  let server: Listening | undefined;
  let publicClient: PublicClient;
  let usdc: Hex;
  let listed: string[];

  before(async () => {
    stack = await startStack({
      networks: [NETWORK],
      env: { EVM_BATCH_AUTHORIZER_KEY: devnetBatchAuthorizerKey() },
    });
    usdc = stack.usdc;
    publicClient = createPublicClient({ transport: http(stack.rpcUrl) });
    const resourceServer = new x402ResourceServer(facilitatorClient(stack))
      .register(NETWORK, new ExactServer())
      .register(NETWORK, new UptoServer())
      .register(NETWORK, new BatchServer(PAY_TO, { withdrawDelay: 900 }));
    const price = {
      amount: PRICE.toString(),
      asset: usdc,
      extra: { assetTransferMethod: "permit2", name: "USD Coin", version: "2" },
    };
    // Per scheme: one route offering the EIP-2612 permit (and the bazaar),
    // one offering the approve (a client prefers the permit when both are).
    const routes: Record<string, unknown> = {};
    for (const scheme of SCHEMES) {
      const accepts = { scheme, network: NETWORK, payTo: PAY_TO, price };
      routes[`GET /${scheme}/permit`] = {
        accepts,
        description: "permit",
        mimeType: "application/json",
        extensions: {
          ...declareEip2612GasSponsoringExtension(),
          ...declareDiscoveryExtension({ output: { example: { ok: true } } }),
        },
      };
      routes[`GET /${scheme}/approve`] = {
        accepts,
        description: "approve",
        mimeType: "application/json",
        extensions: { ...declareErc20ApprovalGasSponsoringExtension() },
      };
    }
    const app = express();
    app.use(paymentMiddleware(routes as never, resourceServer));
    app.get("/*path", (_req, res) => res.json({ ok: true }));
    server = await listenOnLoopback(app);
    listed = ((await (await fetch(`${stack.url}/supported`)).json()) as { extensions: string[] })
      .extensions;
  });

  after(async () => {
    await server?.close();
    await stack?.stop();
  });

  /** A payer with USDC, no gas and no Permit2 allowance: the client signs the extension. */
  const coldPayer = () => newPayerWithoutGas(stack, usdc, 1_000_000n);

  /** The official client's payment for a route, as it would send it. */
  async function paymentFor(
    payer: PrivateKeyAccount,
    scheme: Scheme,
    offer: "permit" | "approve",
  ): Promise<PaymentPayload> {
    const signer = toClientEvmSigner(payer, publicClient);
    const client = new x402Client()
      .register(
        "eip155:*",
        scheme === "exact"
          ? new ExactClient(signer)
          : scheme === "upto"
            ? new UptoClient(signer)
            : new BatchClient(signer, {
                depositPolicy: { depositMultiplier: 5 },
                rpcUrl: stack.rpcUrl,
              }),
      )
      .setSpendControls({
        allowedAssets: [{ network: NETWORK, asset: usdc, maxAmountPerPayment: "1000000" }],
      });
    const http402 = new x402HTTPClient(client);
    const first = await fetch(`${server!.origin}/${scheme}/${offer}`);
    assert.equal(first.status, 402);
    const required = http402.getPaymentRequiredResponse(
      (n) => first.headers.get(n),
      await first.json(),
    );
    return http402.createPaymentPayload(required);
  }

  async function call(path: "verify" | "settle", payload: PaymentPayload): Promise<Answer> {
    const res = await fetch(`${stack.url}/${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": stack.apiKey },
      body: JSON.stringify({
        x402Version: 2,
        paymentPayload: payload,
        paymentRequirements: payload.accepted,
      }),
    });
    return {
      status: res.status,
      body: (await res.json()) as Record<string, unknown>,
      headers: res.headers,
    };
  }

  function withInfo(payload: PaymentPayload, key: string, info: unknown): PaymentPayload {
    return { ...payload, extensions: { ...payload.extensions, [key]: { info } } };
  }

  /** Nothing moved for the payer: no transaction, no gas funded, no allowance. */
  async function assertUntouched(payer: Hex): Promise<void> {
    assert.equal(await publicClient.getTransactionCount({ address: payer }), 0);
    assert.equal(await publicClient.getBalance({ address: payer }), 0n);
    const allowance = await publicClient.readContract({
      address: usdc,
      abi: erc20Abi,
      functionName: "allowance",
      args: [payer, PERMIT2_ADDRESS],
    });
    assert.equal(allowance, 0n);
  }

  /** A refusal at /verify and /settle: HTTP 200, the reason, nothing sent. */
  async function assertRefused(payer: Hex, payload: PaymentPayload, what: string): Promise<void> {
    const verified = await call("verify", payload);
    assert.equal(verified.status, 200, `${what} /verify: ${JSON.stringify(verified.body)}`);
    assert.equal(verified.body["isValid"], false, `${what}: ${JSON.stringify(verified.body)}`);
    assert.match(String(verified.body["invalidReason"]), /^[a-z0-9_]+$/, what);
    const settled = await call("settle", payload);
    assert.equal(settled.status, 200, `${what} /settle: ${JSON.stringify(settled.body)}`);
    assert.equal(settled.body["success"], false, `${what}: ${JSON.stringify(settled.body)}`);
    assert.match(String(settled.body["errorReason"]), /^[a-z0-9_]+$/, what);
    assert.equal(settled.body["transaction"], "");
    await assertUntouched(payer);
  }

  /** How each listed extension's part of a payment is spoiled, and what must come back. */
  const refusals: Record<string, (scheme: Scheme) => Promise<void>> = {
    [EIP2612_GAS_SPONSORING.key]: async (scheme) => {
      const payer = await coldPayer();
      const payment = await paymentFor(payer, scheme, "permit");
      const info = (payment.extensions?.[EIP2612_GAS_SPONSORING.key] as { info: object }).info;
      assert.ok(info, "the client signed a permit");
      // A permit for another spender than Permit2: useless to the payment.
      const spoiled = withInfo(payment, EIP2612_GAS_SPONSORING.key, { ...info, spender: PAY_TO });
      await assertRefused(payer.address, spoiled, `${scheme} eip2612GasSponsoring`);
    },
    [ERC20_APPROVAL_GAS_SPONSORING.key]: async (scheme) => {
      const payer = await coldPayer();
      const payment = await paymentFor(payer, scheme, "approve");
      const key = ERC20_APPROVAL_GAS_SPONSORING.key;
      const info = (payment.extensions?.[key] as { info: Record<string, unknown> }).info;
      assert.ok(info, "the client signed an approve");
      // The client's approve re-signed with five million gas for us to fund.
      const tx = parseTransaction(info["signedTransaction"] as Hex);
      const signedTransaction = await payer.signTransaction({
        chainId: CHAIN_ID,
        type: "eip1559",
        to: usdc,
        data: encodeFunctionData({
          abi: erc20Abi,
          functionName: "approve",
          args: [PERMIT2_ADDRESS, maxUint256],
        }),
        nonce: 0,
        gas: 5_000_000n,
        maxFeePerGas: tx.maxFeePerGas!,
        maxPriorityFeePerGas: tx.maxPriorityFeePerGas!,
      });
      await assertRefused(
        payer.address,
        withInfo(payment, key, { ...info, signedTransaction }),
        `${scheme} erc20ApprovalGasSponsoring`,
      );
      // And bytes that are no transaction at all.
      await assertRefused(
        payer.address,
        withInfo(payment, key, { ...info, signedTransaction: "0x02f8" }),
        `${scheme} erc20ApprovalGasSponsoring (garbage)`,
      );
    },
    bazaar: async (scheme) => {
      const payer = await coldPayer();
      const payment = await paymentFor(payer, scheme, "permit");
      const verified = await call("verify", withInfo(payment, "bazaar", "not a declaration"));
      assert.equal(verified.status, 200, JSON.stringify(verified.body));
      const header = verified.headers.get("extension-responses");
      assert.ok(header, "the bazaar's outcome is reported");
      const outcome = JSON.parse(Buffer.from(header, "base64").toString("utf8")) as {
        bazaar?: { status?: string; rejectedReason?: string };
      };
      assert.equal(outcome.bazaar?.status, "rejected", header);
      assert.ok(outcome.bazaar?.rejectedReason);
    },
    "builder-code": async (scheme) => {
      const payer = await coldPayer();
      const payment = await paymentFor(payer, scheme, "permit");
      // Codes outside the pattern are attribution nobody can encode: dropped.
      const verified = await call(
        "verify",
        withInfo(payment, "builder-code", { a: "NOT A CODE!", s: [42, "x".repeat(99)] }),
      );
      assert.equal(verified.status, 200, JSON.stringify(verified.body));
      assert.equal(verified.body["isValid"], true, JSON.stringify(verified.body));
    },
    "payment-identifier": async (scheme) => {
      const payer = await coldPayer();
      const payment = await paymentFor(payer, scheme, "permit");
      // The specification's one HTTP error for an extension: a malformed id is 400.
      for (const path of ["verify", "settle"] as const) {
        const answer = await call(path, withInfo(payment, "payment-identifier", { id: "x" }));
        assert.equal(answer.status, 400, JSON.stringify(answer.body));
        assert.equal(answer.body["error"], "invalid_payment_identifier");
        assert.match(String(answer.body["message"]), /payment-identifier/);
      }
      await assertUntouched(payer.address);
    },
  };

  test("every extension /supported lists has a refusal case here", () => {
    for (const key of listed) assert.ok(refusals[key], `no refusal case for ${key}`);
    assert.ok(listed.includes(ERC20_APPROVAL_GAS_SPONSORING.key));
  });

  for (const scheme of SCHEMES) {
    test(`${scheme}: each listed extension, spoiled, is answered 200 with a reason`, async () => {
      for (const key of listed) await refusals[key]!(scheme);
    });
  }
});
