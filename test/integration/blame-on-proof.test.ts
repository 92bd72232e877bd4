/**
 * Blame rests on proof, on a devnet chain through the HTTP API: a payload
 * cannot name a payer the mechanism does not verify, a junk authorization
 * beside a permit makes no new key, and a burst from one payer funded for
 * one payment is broadcast once.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  createPublicClient,
  createWalletClient,
  erc20Abi,
  http,
  type Hex,
  type PublicClient,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { PaymentRequirements } from "@x402/core/types";
import { startStack, type TestStack } from "../support/stack.js";
import { signersState } from "../support/signersState.js";
import { post } from "../support/http.js";
import { nowSeconds, signAuthorization } from "../chains/evm/authorization.js";

const NETWORK = "eip155:8453";
const PAY_TO = "0x000000000000000000000000000000000000c0de" as Hex;
const PRICE = 1_000n;

function requirements(stack: TestStack, scheme = "exact"): PaymentRequirements {
  return {
    scheme,
    network: NETWORK,
    asset: stack.usdc,
    amount: PRICE.toString(),
    payTo: PAY_TO,
    maxTimeoutSeconds: 300,
    extra: { name: "USD Coin", version: "2" },
  };
}

async function signed(stack: TestStack, key: Hex) {
  const paymentRequirements = requirements(stack);
  const paymentPayload = await signAuthorization(key, paymentRequirements, {
    to: PAY_TO,
    value: PRICE,
    validAfter: 0n,
    validBefore: nowSeconds() + 600n,
  });
  return { x402Version: 2, paymentPayload, paymentRequirements };
}

async function usdcOf(client: PublicClient, stack: TestStack, who: Hex): Promise<bigint> {
  return client.readContract({
    address: stack.usdc,
    abi: erc20Abi,
    functionName: "balanceOf",
    args: [who],
  });
}

describe("blame on proof (EVM devnet)", () => {
  let stack: TestStack;
  let client: PublicClient;
  before(async () => {
    stack = await startStack({ networks: [NETWORK], payers: 3 });
    client = createPublicClient({ transport: http(stack.rpcUrl) });
  });
  after(() => stack.stop());

  test("a batch settle naming a victim as `authorization.from` is refused 400, nothing sent; the victim still pays", async () => {
    const victim = privateKeyToAccount(stack.payerKeys[2]!).address;
    const injected = {
      x402Version: 2,
      paymentPayload: {
        x402Version: 2,
        accepted: requirements(stack, "batch-settlement"),
        payload: {
          type: "settle",
          receiver: PAY_TO,
          token: stack.usdc,
          authorization: { from: victim },
        },
      },
      paymentRequirements: requirements(stack, "batch-settlement"),
    };
    const before = await signersState(stack, client);
    const res = await post(stack.url, "/settle", injected, stack.apiKey);
    assert.equal(res.status, 400);
    const body = (await res.json()) as { error: string; message: string };
    assert.equal(body.error, "invalid_request");
    assert.match(body.message, /authorization is not a field/);
    assert.deepEqual(await signersState(stack, client), before, "nothing sent");

    const paid = await post(
      stack.url,
      "/settle",
      await signed(stack, stack.payerKeys[2]!),
      stack.apiKey,
    );
    const answer = (await paid.json()) as { success: boolean; errorReason?: string };
    assert.equal(answer.success, true, JSON.stringify(answer));
  });

  test("a junk `authorization` beside a `permit2Authorization` is refused 400, nothing sent", async () => {
    const exact = await signed(stack, stack.payerKeys[1]!);
    const inner = exact.paymentPayload.payload as Record<string, unknown>;
    const both = {
      ...exact,
      paymentPayload: {
        ...exact.paymentPayload,
        payload: {
          ...inner,
          permit2Authorization: {
            from: privateKeyToAccount(stack.payerKeys[1]!).address,
            permitted: { token: stack.usdc, amount: PRICE.toString() },
            spender: PAY_TO,
            nonce: "7",
            deadline: (nowSeconds() + 600n).toString(),
            witness: { to: PAY_TO, validAfter: "0" },
          },
        },
      },
    };
    const before = await signersState(stack, client);
    for (const path of ["/verify", "/settle"]) {
      const res = await post(stack.url, path, both, stack.apiKey);
      assert.equal(res.status, 400, path);
      assert.match(((await res.json()) as { message: string }).message, /not both/);
    }
    assert.deepEqual(await signersState(stack, client), before, "nothing sent");
  });

  test("ten concurrent settles from a payer funded for one: one success, nothing else broadcast", async () => {
    const key = generatePrivateKey();
    const payer = privateKeyToAccount(key).address;
    const funder = createWalletClient({
      account: privateKeyToAccount(stack.payerKeys[0]!),
      transport: http(stack.rpcUrl),
    });
    const hash = await funder.writeContract({
      chain: null,
      address: stack.usdc,
      abi: erc20Abi,
      functionName: "transfer",
      args: [payer, PRICE],
    });
    await client.waitForTransactionReceipt({ hash });
    const payToBefore = await usdcOf(client, stack, PAY_TO);
    const before = await signersState(stack, client);
    const bodies = await Promise.all(Array.from({ length: 10 }, () => signed(stack, key)));
    const answers = await Promise.all(
      bodies.map(async (b) => {
        const res = await post(stack.url, "/settle", b, stack.apiKey);
        return (await res.json()) as { success: boolean; errorReason?: string };
      }),
    );
    const after = await signersState(stack, client);
    assert.equal(answers.filter((a) => a.success).length, 1, JSON.stringify(answers));
    assert.equal(after.nonces - before.nonces, 1, "one transaction: the success");
    assert.equal(await usdcOf(client, stack, PAY_TO), payToBefore + PRICE);
    assert.equal(await usdcOf(client, stack, payer), 0n);
  });
});
