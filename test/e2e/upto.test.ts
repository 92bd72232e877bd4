/**
 * `upto` end to end: the payer signs a Permit2 maximum for the x402 upto
 * proxy; the resource server decides after serving what the request cost and
 * settles that (`setSettlementOverrides`), never more than the maximum. The
 * official `@x402/express` middleware, `HTTPFacilitatorClient` and the
 * `@x402/evm` upto client and server run unmodified against this service.
 * Money is checked on-chain, the settlement row in the database.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { paymentMiddleware, setSettlementOverrides } from "@x402/express";
import type { HTTPFacilitatorClient } from "@x402/core/server";
import { x402ResourceServer } from "@x402/core/server";
import { x402Client, x402HTTPClient } from "@x402/core/client";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { UptoEvmScheme as UptoEvmServerScheme } from "@x402/evm/upto/server";
import { UptoEvmScheme as UptoEvmClientScheme } from "@x402/evm/upto/client";
import { PERMIT2_ADDRESS, x402UptoPermit2ProxyABI, x402UptoPermit2ProxyAddress } from "@x402/evm";
import { wrapFetchWithPayment } from "@x402/fetch";
import { privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  erc20Abi,
  http,
  maxUint256,
  type Hex,
  type PublicClient,
} from "viem";
import { facilitatorClient, listenOnLoopback, type Listening } from "../support/resourceServer.js";
import { startStack, type TestStack } from "../support/stack.js";
import { usdcBalance } from "../chains/evm/payments.js";
import { post } from "../support/http.js";

const NETWORK = "eip155:8453";
const PAY_TO = "0x000000000000000000000000000000000000c0de" as const;
const MAX_ATOMIC = 10_000n; // $0.01 in USDC
const USED_ATOMIC = 2_500n; // what the request turned out to cost

describe("upto through Permit2, settled at the amount used", () => {
  let stack: TestStack;
  let server: Listening | undefined;
  let resourceUrl: string;
  let publicClient: PublicClient;
  let facilitator: HTTPFacilitatorClient;

  /** The payer's one-time approval of Permit2 on USDC. */
  async function approvePermit2(payer: PrivateKeyAccount): Promise<void> {
    const chain = defineChain({
      id: 8453,
      name: "Base (devnet)",
      nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
      rpcUrls: { default: { http: [stack.rpcUrl] } },
    });
    const wallet = createWalletClient({ account: payer, chain, transport: http(stack.rpcUrl) });
    const hash = await wallet.writeContract({
      address: stack.usdc,
      abi: erc20Abi,
      functionName: "approve",
      args: [PERMIT2_ADDRESS, maxUint256],
    });
    assert.equal((await publicClient.waitForTransactionReceipt({ hash })).status, "success");
  }

  before(async () => {
    // Metered, as in production: a zero-amount settle must not be billed.
    stack = await startStack({
      networks: [NETWORK],
      payers: 3,
      env: { METER_SETTLEMENTS: "true" },
    });
    publicClient = createPublicClient({ transport: http(stack.rpcUrl) });
    facilitator = facilitatorClient(stack);
    const resourceServer = new x402ResourceServer(facilitator).register(
      NETWORK,
      new UptoEvmServerScheme(),
    );
    const app = express();
    app.use(
      paymentMiddleware(
        {
          "GET /compute": {
            accepts: { scheme: "upto", network: NETWORK, payTo: PAY_TO, price: "$0.01" },
            description: "Metered compute, billed by use up to $0.01",
            mimeType: "application/json",
          },
        },
        resourceServer,
      ),
    );
    app.get("/compute", (_req, res) => {
      // The work is done; it cost less than the maximum.
      setSettlementOverrides(res, { amount: USED_ATOMIC.toString() });
      res.json({ result: 42 });
    });
    server = await listenOnLoopback(app);
    resourceUrl = `${server.origin}/compute`;
  });

  after(async () => {
    await server?.close();
    await stack?.stop();
  });

  test("/supported lists upto with the facilitator address payers sign for", async () => {
    const supported = await facilitator.getSupported();
    const kind = supported.kinds.find((k) => k.network === NETWORK && k.scheme === "upto");
    assert.ok(kind, JSON.stringify(supported.kinds));
    const address = kind.extra?.["facilitatorAddress"] as string;
    const ours = stack.devnet.networks[NETWORK]!.facilitatorPrivateKeys.map((k) =>
      privateKeyToAccount(k as Hex).address.toLowerCase(),
    );
    assert.ok(ours.includes(address.toLowerCase()), address);
  });

  test("402 → pay up to the maximum → 200; exactly the amount used moves, through the upto proxy", async () => {
    const payer = privateKeyToAccount(stack.payerKeys[0]!);
    await approvePermit2(payer);
    const [payerBefore, payToBefore] = await Promise.all([
      usdcBalance(stack.rpcUrl, stack.usdc, payer.address),
      usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO),
    ]);

    const client = new x402Client().register("eip155:*", new UptoEvmClientScheme(payer));
    const res = await wrapFetchWithPayment(fetch, client)(resourceUrl);
    assert.equal(res.status, 200, await res.clone().text());
    assert.deepEqual(await res.json(), { result: 42 });

    const receipt = new x402HTTPClient(client).getPaymentSettleResponse((n) => res.headers.get(n));
    assert.equal(receipt.success, true);
    assert.equal(receipt.amount, USED_ATOMIC.toString(), "the response carries the charged amount");
    const tx = await publicClient.getTransaction({ hash: receipt.transaction as Hex });
    assert.equal(tx.to?.toLowerCase(), x402UptoPermit2ProxyAddress.toLowerCase());

    assert.equal(
      await usdcBalance(stack.rpcUrl, stack.usdc, payer.address),
      payerBefore - USED_ATOMIC,
    );
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO), payToBefore + USED_ATOMIC);

    const row = await stack.service.db
      .selectFrom("settlements")
      .selectAll()
      .where("transaction", "=", receipt.transaction)
      .executeTakeFirstOrThrow();
    assert.equal(row.status, "succeeded");
    assert.equal(row.scheme, "upto");
    assert.equal(row.amount, USED_ATOMIC.toString(), "the row records the charge, not the maximum");
    assert.equal(row.payer, payer.address.toLowerCase());
  });

  /** A signed upto payment for `MAX_ATOMIC`, and requirements asking `amount` at settle. */
  async function signedUpto(
    payer: PrivateKeyAccount,
    amount: bigint,
  ): Promise<{ paymentPayload: PaymentPayload; paymentRequirements: PaymentRequirements }> {
    const supported = await facilitator.getSupported();
    const kind = supported.kinds.find((k) => k.network === NETWORK && k.scheme === "upto")!;
    const accepted: PaymentRequirements = {
      scheme: "upto",
      network: NETWORK,
      asset: stack.usdc,
      amount: MAX_ATOMIC.toString(),
      payTo: PAY_TO,
      maxTimeoutSeconds: 300,
      extra: { name: "USD Coin", version: "2", ...kind.extra },
    };
    const partial = await new UptoEvmClientScheme(payer).createPaymentPayload(2, accepted);
    return {
      paymentPayload: {
        x402Version: 2,
        accepted,
        payload: partial.payload,
        resource: { url: resourceUrl, description: "", mimeType: "application/json" },
      } as PaymentPayload,
      paymentRequirements: { ...accepted, amount: amount.toString() },
    };
  }

  test("the devnet upto proxy takes a settle only from the named facilitator, and never above the maximum", async () => {
    const payer = privateKeyToAccount(stack.payerKeys[1]!);
    await approvePermit2(payer);
    const { paymentPayload } = await signedUpto(payer, USED_ATOMIC);
    const auth = (paymentPayload.payload as { permit2Authorization: Record<string, never> })
      .permit2Authorization as unknown as {
      from: Hex;
      permitted: { token: Hex; amount: string };
      nonce: string;
      deadline: string;
      witness: { to: Hex; facilitator: Hex; validAfter: string };
    };
    const signature = (paymentPayload.payload as { signature: Hex }).signature;
    const args = (amount: bigint) =>
      [
        {
          permitted: { token: auth.permitted.token, amount: BigInt(auth.permitted.amount) },
          nonce: BigInt(auth.nonce),
          deadline: BigInt(auth.deadline),
        },
        amount,
        auth.from,
        {
          to: auth.witness.to,
          facilitator: auth.witness.facilitator,
          validAfter: BigInt(auth.witness.validAfter),
        },
        signature,
      ] as const;
    const simulate = (from: Hex, amount: bigint) =>
      publicClient
        .simulateContract({
          account: from,
          address: x402UptoPermit2ProxyAddress,
          abi: x402UptoPermit2ProxyABI,
          functionName: "settle",
          args: args(amount),
        })
        .then(
          () => "ok",
          (e: Error) => e.message,
        );
    assert.equal(await simulate(auth.witness.facilitator, USED_ATOMIC), "ok");
    assert.match(await simulate(payer.address, USED_ATOMIC), /UnauthorizedFacilitator/);
    assert.match(
      await simulate(auth.witness.facilitator, MAX_ATOMIC + 1n),
      /AmountExceedsPermitted/,
    );
  });

  test("a settle-time amount of zero succeeds with no transaction, moves nothing and holds nothing: a later settle of the permit moves its amount once", async () => {
    const payer = privateKeyToAccount(stack.payerKeys[1]!);
    await approvePermit2(payer);
    const before = await usdcBalance(stack.rpcUrl, stack.usdc, payer.address);
    const body = { x402Version: 2, ...(await signedUpto(payer, 0n)) };
    const res = await post(stack.url, "/settle", body, stack.apiKey);
    assert.equal(res.status, 200);
    const out = (await res.json()) as { success: boolean; transaction: string; amount?: string };
    assert.equal(out.success, true, JSON.stringify(out));
    assert.equal(out.transaction, "");
    assert.equal(out.amount, "0");
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payer.address), before);
    const row = await stack.service.db
      .selectFrom("settlements")
      .selectAll()
      .where("payer", "=", payer.address.toLowerCase())
      .executeTakeFirstOrThrow();
    assert.equal(row.status, "succeeded");
    assert.equal(row.amount, "0");
    assert.ok(!row.transaction, "no transaction recorded");
    const usage = await stack.service.db
      .selectFrom("quota_usage")
      .select(["used", "reserved"])
      .where("account_id", "=", stack.accountId)
      .executeTakeFirstOrThrow();
    assert.deepEqual(usage, { used: 1, reserved: 0 }, "only the earlier paid request counted");

    // Nothing moved, so nothing is answered as paid from that row: the same
    // signed permit settled again at an amount moves that amount, once.
    const charged = {
      ...body,
      paymentRequirements: { ...body.paymentRequirements, amount: "700" },
    };
    const paid = (await (await post(stack.url, "/settle", charged, stack.apiKey)).json()) as {
      success: boolean;
      transaction: string;
      amount?: string;
    };
    assert.equal(paid.success, true, JSON.stringify(paid));
    assert.match(paid.transaction, /^0x[0-9a-f]{64}$/);
    assert.equal(paid.amount, "700");
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payer.address), before - 700n);
    for (const again of [charged, body]) {
      const out = (await (await post(stack.url, "/settle", again, stack.apiKey)).json()) as {
        success: boolean;
        transaction: string;
        errorReason?: string;
      };
      assert.deepEqual(
        [out.success, out.transaction],
        [false, ""],
        `a replay at ${again.paymentRequirements.amount}: ${JSON.stringify(out)}`,
      );
    }
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payer.address), before - 700n);
  });

  test("a settle-time amount above the signed maximum fails clearly and moves nothing", async () => {
    const payer = privateKeyToAccount(stack.payerKeys[2]!);
    await approvePermit2(payer);
    const before = await usdcBalance(stack.rpcUrl, stack.usdc, payer.address);
    const body = { x402Version: 2, ...(await signedUpto(payer, MAX_ATOMIC + 1n)) };
    const res = await post(stack.url, "/settle", body, stack.apiKey);
    assert.equal(res.status, 200);
    const out = (await res.json()) as {
      success: boolean;
      errorReason?: string;
      transaction: string;
    };
    assert.equal(out.success, false);
    assert.match(out.errorReason ?? "", /exceeds/i, JSON.stringify(out));
    assert.equal(out.transaction, "");
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payer.address), before);

    // The same payment at its maximum still settles: nothing was used up.
    const ok = { x402Version: 2, ...(await signedUpto(payer, MAX_ATOMIC)) };
    const settled = (await (await post(stack.url, "/settle", ok, stack.apiKey)).json()) as {
      success: boolean;
    };
    assert.equal(settled.success, true, JSON.stringify(settled));
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payer.address), before - MAX_ATOMIC);
  });

  test("a malformed upto payload gets a 400 naming the field, and nothing is recorded", async () => {
    const payer = privateKeyToAccount(stack.payerKeys[0]!);
    const { paymentPayload, paymentRequirements } = await signedUpto(payer, USED_ATOMIC);
    const payload = paymentPayload.payload as {
      permit2Authorization: { witness: Record<string, unknown> };
    };
    delete payload.permit2Authorization.witness.facilitator;
    const rowsBefore = await stack.service.db
      .selectFrom("settlements")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .executeTakeFirstOrThrow();
    for (const path of ["/verify", "/settle"]) {
      const res = await post(
        stack.url,
        path,
        { x402Version: 2, paymentPayload, paymentRequirements },
        stack.apiKey,
      );
      assert.equal(res.status, 400, path);
      const text = await res.text();
      assert.match(text, /permit2Authorization\.witness\.facilitator is required/, text);
    }
    const rowsAfter = await stack.service.db
      .selectFrom("settlements")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .executeTakeFirstOrThrow();
    assert.equal(Number(rowsAfter.n), Number(rowsBefore.n));
  });
});
