/**
 * Blame rests on proof, on a devnet chain through the HTTP API: a payload
 * cannot name a payer the mechanism does not verify, a junk authorization
 * beside a permit makes no new key, and a burst from one payer funded for
 * one payment is broadcast once, and a merchant that spends the payer's
 * authorization before our transaction does gets nobody refused.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  createPublicClient,
  createWalletClient,
  erc20Abi,
  http,
  parseSignature,
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

describe("a merchant that spends the authorization first (EVM devnet, 2 s blocks)", () => {
  let stack: TestStack;
  let client: PublicClient;
  before(async () => {
    stack = await startStack({ networks: [NETWORK], payers: 2, blockTimeSeconds: 2 });
    client = createPublicClient({ transport: http(stack.rpcUrl) });
  });
  after(() => stack.stop());

  test("its copy lands before ours, ours reverts, and the payer is not refused: its next payment settles", async () => {
    const key = generatePrivateKey();
    const payer = privateKeyToAccount(key).address;
    const funder = createWalletClient({
      account: privateKeyToAccount(stack.payerKeys[0]!),
      transport: http(stack.rpcUrl),
    });
    const funded = await funder.writeContract({
      chain: null,
      address: stack.usdc,
      abi: erc20Abi,
      functionName: "transfer",
      args: [payer, 2n * PRICE],
    });
    await client.waitForTransactionReceipt({ hash: funded });
    const payToBefore = await usdcOf(client, stack, PAY_TO);
    const signers = new Set(
      stack.devnet.networks[NETWORK]!.facilitatorPrivateKeys.map((k) =>
        privateKeyToAccount(k as Hex).address.toLowerCase(),
      ),
    );

    const body = await signed(stack, key);
    const settling = post(stack.url, "/settle", body, stack.apiKey).then(
      async (res) => (await res.json()) as { success: boolean; errorReason?: string },
    );
    // Our transaction waits in the pool for the next block: the merchant
    // (or anyone who saw the payload) sends the same authorization with a
    // higher tip, so the block takes its copy first.
    const ours = await until(async () => {
      const pool = (await client.request({ method: "txpool_content" as never })) as {
        pending: Record<string, Record<string, { hash: Hex; maxFeePerGas?: Hex }>>;
      };
      for (const [from, txs] of Object.entries(pool.pending)) {
        if (signers.has(from.toLowerCase())) return Object.values(txs)[0];
      }
      return undefined;
    });
    const auth = (
      body.paymentPayload.payload as { authorization: Record<string, string>; signature: Hex }
    ).authorization;
    const sig = parseSignature((body.paymentPayload.payload as { signature: Hex }).signature);
    const merchant = createWalletClient({
      account: privateKeyToAccount(stack.payerKeys[1]!),
      transport: http(stack.rpcUrl),
    });
    const fee = BigInt(ours.maxFeePerGas ?? "0x0") * 2n + 10n ** 9n;
    const copy = await merchant.writeContract({
      chain: null,
      address: stack.usdc,
      abi: TRANSFER_WITH_AUTHORIZATION_ABI,
      functionName: "transferWithAuthorization",
      args: [
        auth["from"] as Hex,
        auth["to"] as Hex,
        BigInt(auth["value"]!),
        BigInt(auth["validAfter"]!),
        BigInt(auth["validBefore"]!),
        auth["nonce"] as Hex,
        Number(sig.v ?? BigInt(sig.yParity + 27)),
        sig.r,
        sig.s,
      ],
      maxFeePerGas: fee,
      maxPriorityFeePerGas: fee,
      gas: 200_000n,
    });
    const copyReceipt = await client.waitForTransactionReceipt({ hash: copy });
    assert.equal(copyReceipt.status, "success");
    const oursReceipt = await client.waitForTransactionReceipt({ hash: ours.hash });
    assert.equal(oursReceipt.status, "reverted", "the authorization was spent by the copy first");
    assert.equal(oursReceipt.blockNumber, copyReceipt.blockNumber, "the same block, copy first");
    await settling;
    // The money reached payTo once, through the merchant's copy.
    assert.equal(await usdcOf(client, stack, PAY_TO), payToBefore + PRICE);

    const row = await stack.service.db
      .selectFrom("settlements")
      .select(["status", "failure_cause", "payer"])
      .where("payer", "=", payer.toLowerCase())
      .executeTakeFirstOrThrow();
    assert.notEqual(row.failure_cause, "payer", JSON.stringify(row));

    // The payer is not cooled: its next payment, to any merchant, settles.
    const next = await post(stack.url, "/settle", await signed(stack, key), stack.apiKey);
    const answer = (await next.json()) as { success: boolean; errorReason?: string };
    assert.equal(answer.success, true, JSON.stringify(answer));
    assert.equal(await usdcOf(client, stack, PAY_TO), payToBefore + 2n * PRICE);
    assert.equal(await usdcOf(client, stack, payer), 0n);
  });
});

const TRANSFER_WITH_AUTHORIZATION_ABI = [
  {
    type: "function",
    name: "transferWithAuthorization",
    stateMutability: "nonpayable",
    inputs: [
      { name: "from", type: "address" },
      { name: "to", type: "address" },
      { name: "value", type: "uint256" },
      { name: "validAfter", type: "uint256" },
      { name: "validBefore", type: "uint256" },
      { name: "nonce", type: "bytes32" },
      { name: "v", type: "uint8" },
      { name: "r", type: "bytes32" },
      { name: "s", type: "bytes32" },
    ],
    outputs: [],
  },
] as const;

/** Polls `probe` every 20 ms until it gives something (30 s at most). */
async function until<T>(probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const found = await probe();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error("not seen within 30 s");
    await new Promise((r) => setTimeout(r, 20));
  }
}
