/**
 * `batch-settlement` end to end with the official `@x402/evm` batch-settlement
 * client and server and `@x402/express`, unmodified, against this service and
 * the devnet escrow and ERC-3009 deposit collector: the payer's first request
 * opens a channel with a deposit; the next ones pay with vouchers only; the
 * resource server then claims the vouchers (this service co-signs as the
 * receiver authorizer it advertises), settles the claimed total to itself and
 * refunds the payer the rest. Money is checked on-chain at every step, the
 * settlement rows (with a claim's voucher count) in the database. It runs
 * once per deposit collector: ERC-3009 (USDC) and Permit2 (USDG, after the
 * payer's one-time Permit2 approval).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { paymentMiddleware } from "@x402/express";
import type { HTTPFacilitatorClient } from "@x402/core/server";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { x402ResourceServer } from "@x402/core/server";
import { x402Client } from "@x402/core/client";
import { PERMIT2_ADDRESS, toClientEvmSigner } from "@x402/evm";
import { BatchSettlementEvmScheme as BatchServerScheme } from "@x402/evm/batch-settlement/server";
import { BatchSettlementEvmScheme as BatchClientScheme } from "@x402/evm/batch-settlement/client";
import { wrapFetchWithPayment } from "@x402/fetch";
import { privateKeyToAccount } from "viem/accounts";
import {
  createPublicClient,
  createWalletClient,
  decodeFunctionData,
  defineChain,
  parseAbi,
  erc20Abi,
  getAddress,
  http,
  maxUint256,
  type Hex,
  type PublicClient,
} from "viem";
import { devnetBatchAuthorizerKey } from "../../devnet/evm/keys.js";
import {
  X402_BATCH_SETTLEMENT_ADDRESS,
  X402_ERC3009_DEPOSIT_COLLECTOR_ADDRESS,
  X402_PERMIT2_DEPOSIT_COLLECTOR_ADDRESS,
} from "../../devnet/evm/deploy.js";
import { facilitatorClient, listenOnLoopback, type Listening } from "../support/resourceServer.js";
import { startStack, type TestStack } from "../support/stack.js";
import { usdcBalance } from "../chains/evm/payments.js";
import { FRONT_RUN_FEES, settleRacedBy } from "../chains/evm/settleRace.js";

const PAY_TO = "0x000000000000000000000000000000000000ba7c" as const;
const PRICE = 1_000n; // 0.001 of a 6-decimal dollar token
const REQUESTS = 3;
const ESCROW_SETTLE_ABI = parseAbi(["function settle(address receiver, address token)"]);
const DEPOSIT_ABI = parseAbi([
  "function deposit((address payer, address payerAuthorizer, address receiver, address receiverAuthorizer, address token, uint40 withdrawDelay, bytes32 salt) config, uint128 amount, address collector, bytes collectorData)",
]);

interface Variant {
  title: string;
  network: `${string}:${string}`;
  /** Token symbol on the devnet; its deposit goes through this collector. */
  symbol: "USDC" | "USDG";
  transferMethod: "eip3009" | "permit2";
  /** Price extra the server needs for a token outside the SDK's defaults. */
  extra?: Record<string, string>;
}

const VARIANTS: Variant[] = [
  {
    title: "USDC on eip155:8453, deposit through the ERC-3009 collector",
    network: "eip155:8453",
    symbol: "USDC",
    transferMethod: "eip3009",
  },
  {
    title: "USDG on eip155:4663, deposit through the Permit2 collector",
    network: "eip155:4663",
    symbol: "USDG",
    transferMethod: "permit2",
    extra: { assetTransferMethod: "permit2", name: "Global Dollar", version: "1" },
  },
];

for (const variant of VARIANTS) {
  const NETWORK = variant.network;
  describe(`batch-settlement: deposit, vouchers, claim, settle, refund (${variant.title})`, () => {
    let stack: TestStack;
    let server: Listening | undefined;
    let resourceUrl: string;
    let publicClient: PublicClient;
    let facilitator: HTTPFacilitatorClient;
    let serverScheme: BatchServerScheme;
    let clientScheme: BatchClientScheme;
    let pay: typeof fetch;
    const authorizer = privateKeyToAccount(devnetBatchAuthorizerKey());
    const token = () => stack.assets[variant.symbol]! as Hex;

    before(async () => {
      stack = await startStack({
        networks: [NETWORK],
        env: { EVM_BATCH_AUTHORIZER_KEY: devnetBatchAuthorizerKey() },
      });
      publicClient = createPublicClient({ transport: http(stack.rpcUrl) });
      facilitator = facilitatorClient(stack);
      serverScheme = new BatchServerScheme(PAY_TO, { withdrawDelay: 900 });
      const resourceServer = new x402ResourceServer(facilitator).register(NETWORK, serverScheme);
      const app = express();
      app.use(
        paymentMiddleware(
          {
            "GET /tokens": {
              accepts: {
                scheme: "batch-settlement",
                network: NETWORK,
                payTo: PAY_TO,
                price: variant.extra
                  ? { amount: PRICE.toString(), asset: token(), extra: variant.extra }
                  : "$0.001",
              },
              description: "Per-call API paid from a channel",
              mimeType: "application/json",
            },
          },
          resourceServer,
        ),
      );
      app.get("/tokens", (_req, res) => res.json({ tokens: 7 }));
      server = await listenOnLoopback(app);
      resourceUrl = `${server.origin}/tokens`;

      const payer = privateKeyToAccount(stack.payerKeys[0]!);
      if (variant.transferMethod === "permit2") {
        // The payer's one-time approval of Permit2 on a token without EIP-3009.
        const wallet = createWalletClient({
          account: payer,
          chain: defineChain({
            id: Number(NETWORK.split(":")[1]),
            name: "devnet",
            nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
            rpcUrls: { default: { http: [stack.rpcUrl] } },
          }),
          transport: http(stack.rpcUrl),
        });
        const hash = await wallet.writeContract({
          address: token(),
          abi: erc20Abi,
          functionName: "approve",
          args: [PERMIT2_ADDRESS, maxUint256],
        });
        assert.equal((await publicClient.waitForTransactionReceipt({ hash })).status, "success");
      }
      clientScheme = new BatchClientScheme(toClientEvmSigner(payer, publicClient), {
        depositPolicy: { depositMultiplier: 10 },
        rpcUrl: stack.rpcUrl,
      });
      const client = new x402Client().register("eip155:*", clientScheme);
      // A token outside the SDK's defaults needs the payer's explicit opt-in.
      if (variant.extra) {
        client.setSpendControls({
          allowedAssets: [{ network: NETWORK, asset: token(), maxAmountPerPayment: "1000000" }],
        });
      }
      pay = wrapFetchWithPayment(fetch, client);
    });

    after(async () => {
      await server?.close();
      await stack?.stop();
    });

    const rows = () =>
      stack.service.db
        .selectFrom("settlements")
        .select(["status", "transaction", "units", "request", "error_reason"])
        .where("scheme", "=", "batch-settlement")
        .orderBy("started_at")
        .execute();
    const actionOf = (request: unknown): string =>
      String(
        (
          (typeof request === "string" ? JSON.parse(request) : request) as {
            paymentPayload: { payload: { type?: string; settleAction?: string } };
          }
        ).paymentPayload.payload.type ?? "",
      );

    test("/supported advertises receiverAuthorizer for batch-settlement", async () => {
      const supported = await facilitator.getSupported();
      const kind = supported.kinds.find(
        (k) => k.network === NETWORK && k.scheme === "batch-settlement",
      );
      assert.equal(
        String(kind?.extra?.["receiverAuthorizer"]).toLowerCase(),
        authorizer.address.toLowerCase(),
      );
    });

    test("the first request deposits into the escrow; later ones pay with vouchers only", async () => {
      const payer = privateKeyToAccount(stack.payerKeys[0]!);
      const payerBefore = await usdcBalance(stack.rpcUrl, token(), payer.address);
      for (let i = 0; i < REQUESTS; i++) {
        const res = await pay(resourceUrl);
        assert.equal(res.status, 200, `request ${i}: ${await res.clone().text()}`);
        assert.deepEqual(await res.json(), { tokens: 7 });
      }
      const escrowed = await usdcBalance(stack.rpcUrl, token(), X402_BATCH_SETTLEMENT_ADDRESS);
      assert.ok(escrowed >= PRICE * BigInt(REQUESTS), `escrow holds ${escrowed}`);
      assert.equal(
        await usdcBalance(stack.rpcUrl, token(), payer.address),
        payerBefore - escrowed,
        "only the deposit left the payer",
      );
      const recorded = await rows();
      assert.deepEqual(
        recorded.map((r) => [actionOf(r.request), r.status, r.units]),
        [["deposit", "succeeded", 0]],
        "one on-chain deposit; vouchers need no settlement",
      );
      // The deposit went through the collector for this token's transfer method.
      const depositTx = await publicClient.getTransaction({
        hash: recorded[0]!.transaction as Hex,
      });
      const call = decodeFunctionData({ abi: DEPOSIT_ABI, data: depositTx.input });
      assert.equal(
        (call.args[2] as string).toLowerCase(),
        (variant.transferMethod === "permit2"
          ? X402_PERMIT2_DEPOSIT_COLLECTOR_ADDRESS
          : X402_ERC3009_DEPOSIT_COLLECTOR_ADDRESS
        ).toLowerCase(),
      );
    });

    test("claim: the vouchers are claimed on-chain and the row counts them", async () => {
      const manager = serverScheme.createChannelManager(facilitator, NETWORK, token());
      const claims = await manager.claim();
      assert.equal(claims.length, 1, JSON.stringify(claims));
      assert.ok(claims[0]!.vouchers >= 1);
      const receipt = await publicClient.getTransactionReceipt({
        hash: claims[0]!.transaction as Hex,
      });
      assert.equal(receipt.status, "success");
      const claimRow = (await rows()).find((r) => actionOf(r.request) === "claim");
      assert.ok(claimRow, "claim recorded");
      assert.equal(claimRow.status, "succeeded");
      assert.equal(
        claimRow.units,
        claims[0]!.vouchers,
        "the row records the claim's voucher count",
      );

      const settled = await manager.settle();
      assert.match(settled.transaction, /^0x[0-9a-f]{64}$/);
      assert.equal(
        await usdcBalance(stack.rpcUrl, token(), PAY_TO),
        PRICE * BigInt(REQUESTS),
        "the receiver got exactly what was used",
      );
    });

    test("settle again: a receiver paid out once is paid its next claims by the same settle payload", async () => {
      const res = await pay(resourceUrl);
      assert.equal(res.status, 200, await res.clone().text());
      const manager = serverScheme.createChannelManager(facilitator, NETWORK, token());
      const claims = await manager.claim();
      assert.equal(claims.length, 1, JSON.stringify(claims));
      const receiverBefore = await usdcBalance(stack.rpcUrl, token(), PAY_TO);
      const settled = await manager.settle();
      assert.match(settled.transaction, /^0x[0-9a-f]{64}$/, JSON.stringify(settled));
      assert.equal(
        await usdcBalance(stack.rpcUrl, token(), PAY_TO),
        receiverBefore + PRICE,
        "the receiver got this claim's amount",
      );
      const settles = (await rows()).filter((r) => actionOf(r.request) === "settle");
      assert.deepEqual(
        settles.map((r) => r.status),
        ["succeeded", "succeeded"],
        "each payout is a row of its own",
      );
    });

    test("settle: a payout another caller made first is not our success, though our call did not revert", async () => {
      const res = await pay(resourceUrl);
      assert.equal(res.status, 200, await res.clone().text());
      const manager = serverScheme.createChannelManager(facilitator, NETWORK, token());
      const claims = await manager.claim();
      assert.equal(claims.length, 1, JSON.stringify(claims));
      const receiverBefore = await usdcBalance(stack.rpcUrl, token(), PAY_TO);
      // The receiver named checksummed, as a resource server may.
      const requirements = {
        scheme: "batch-settlement",
        network: NETWORK,
        asset: token(),
        amount: "0",
        payTo: PAY_TO,
        maxTimeoutSeconds: 0,
        extra: {},
      };
      const settlePayload = {
        x402Version: 2,
        accepted: requirements,
        payload: { type: "settle", receiver: getAddress(PAY_TO), token: token() },
      } as PaymentPayload;
      // Someone else calls the escrow's settle for the same receiver in the
      // block of ours: ours then finds nothing owed and returns, moving nothing.
      const raced = await settleRacedBy(
        stack.rpcUrl,
        () => facilitator.settle(settlePayload, requirements as PaymentRequirements),
        () =>
          createWalletClient({
            account: privateKeyToAccount(stack.payerKeys[0]!),
            transport: http(stack.rpcUrl),
          }).writeContract({
            chain: null,
            address: X402_BATCH_SETTLEMENT_ADDRESS,
            abi: ESCROW_SETTLE_ABI,
            functionName: "settle",
            args: [PAY_TO, token()],
            gas: 200_000n,
            ...FRONT_RUN_FEES,
          }),
      );
      assert.deepEqual(
        [raced.success, raced.errorReason],
        [false, "evm_settlement_transfer_missing"],
        JSON.stringify(raced),
      );
      assert.equal(
        await usdcBalance(stack.rpcUrl, token(), PAY_TO),
        receiverBefore + PRICE,
        "the receiver was paid once, by the other caller",
      );
      const settleRow = (await rows()).filter((r) => actionOf(r.request) === "settle").at(-1);
      assert.deepEqual(
        [settleRow?.status, settleRow?.error_reason],
        ["failed", "evm_settlement_transfer_missing"],
      );
      const ours = await publicClient.getTransactionReceipt({
        hash: settleRow!.transaction as Hex,
      });
      assert.equal(ours.status, "success", "mined without reverting");
    });

    test("refund: the payer gets the unclaimed rest of the deposit back", async () => {
      const payer = privateKeyToAccount(stack.payerKeys[0]!);
      const before = await usdcBalance(stack.rpcUrl, token(), payer.address);
      const escrowBefore = await usdcBalance(stack.rpcUrl, token(), X402_BATCH_SETTLEMENT_ADDRESS);
      const manager = serverScheme.createChannelManager(facilitator, NETWORK, token());
      const refunds = await manager.refund();
      assert.equal(refunds.length, 1, JSON.stringify(refunds));
      const after = await usdcBalance(stack.rpcUrl, token(), payer.address);
      assert.equal(after - before, escrowBefore, "everything left in the escrow went back");
      assert.equal(await usdcBalance(stack.rpcUrl, token(), X402_BATCH_SETTLEMENT_ADDRESS), 0n);
      const actions = (await rows()).map((r) => [actionOf(r.request), r.status, r.units]);
      assert.deepEqual(actions.at(-1), ["refund", "succeeded", 0]);
    });
  });
}
