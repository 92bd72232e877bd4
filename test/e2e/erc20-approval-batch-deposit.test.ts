/**
 * `erc20ApprovalGasSponsoring` for a `batch-settlement` deposit, end to end
 * from a cold start: a payer holding USDG (no EIP-3009, no EIP-2612) and not
 * a wei of gas, who never approved Permit2, opens a payment channel through
 * the Permit2 deposit collector. The official batch-settlement client, told
 * by the resource server that the extension is on offer, signs an ordinary
 * `approve(Permit2, max)` next to its deposit; this service funds the
 * approve's gas, relays it, then sends the escrow's `deposit`. The channel
 * is checked on-chain, the settlement's journal in the database.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { paymentMiddleware } from "@x402/express";
import { x402ResourceServer } from "@x402/core/server";
import { x402Client } from "@x402/core/client";
import { PERMIT2_ADDRESS, toClientEvmSigner } from "@x402/evm";
import { BatchSettlementEvmScheme as BatchServerScheme } from "@x402/evm/batch-settlement/server";
import {
  BatchSettlementEvmScheme as BatchClientScheme,
  readChannelBalanceAndTotalClaimed,
} from "@x402/evm/batch-settlement/client";
import {
  declareErc20ApprovalGasSponsoringExtension,
  ERC20_APPROVAL_GAS_SPONSORING,
} from "@x402/extensions";
import { wrapFetchWithPayment } from "@x402/fetch";
import type { PaymentPayload } from "@x402/core/types";
import { createPublicClient, erc20Abi, http, type Hex, type PublicClient } from "viem";
import { devnetBatchAuthorizerKey } from "../../devnet/evm/keys.js";
import { X402_BATCH_SETTLEMENT_ADDRESS } from "../../devnet/evm/deploy.js";
import { facilitatorClient, listenOnLoopback, type Listening } from "../support/resourceServer.js";
import { newPayerWithoutGas } from "../chains/evm/devnetChain.js";
import { startStack, type TestStack } from "../support/stack.js";
import { usdcBalance as tokenBalance } from "../chains/evm/payments.js";

const NETWORK = "eip155:4663";
const USDG = "0xe343167631d89B6Ffc58B88d6b7fB0228795491D" as const;
const PAY_TO = "0x000000000000000000000000000000000000ba7d" as const;
const PRICE = 1_000n;
const DEPOSIT = 10n * PRICE; // depositMultiplier 10

describe("erc20ApprovalGasSponsoring: a cold payer opens a batch-settlement channel through the Permit2 collector", () => {
  let stack: TestStack;
  let server: Listening | undefined;
  let publicClient: PublicClient;

  before(async () => {
    stack = await startStack({
      networks: [NETWORK],
      env: { EVM_BATCH_AUTHORIZER_KEY: devnetBatchAuthorizerKey() },
    });
    publicClient = createPublicClient({ transport: http(stack.rpcUrl) });
    const resourceServer = new x402ResourceServer(facilitatorClient(stack)).register(
      NETWORK,
      new BatchServerScheme(PAY_TO, { withdrawDelay: 900 }),
    );
    const app = express();
    app.use(
      paymentMiddleware(
        {
          "GET /tokens": {
            accepts: {
              scheme: "batch-settlement",
              network: NETWORK,
              payTo: PAY_TO,
              price: {
                amount: PRICE.toString(),
                asset: USDG,
                extra: { assetTransferMethod: "permit2", name: "Global Dollar", version: "1" },
              },
            },
            description: "Per-call API paid from a channel, approval gas sponsored",
            mimeType: "application/json",
            extensions: { ...declareErc20ApprovalGasSponsoringExtension() },
          },
        },
        resourceServer,
      ),
    );
    app.get("/tokens", (_req, res) => res.json({ tokens: 7 }));
    server = await listenOnLoopback(app);
  });

  after(async () => {
    await server?.close();
    await stack?.stop();
  });

  test("approve relayed, deposit mined, channel funded; the settlement journals funding, approve and deposit", async () => {
    const payer = await newPayerWithoutGas(stack, USDG, 100_000n);
    const escrowBefore = await tokenBalance(stack.rpcUrl, USDG, X402_BATCH_SETTLEMENT_ADDRESS);

    const signer = toClientEvmSigner(payer, publicClient);
    const scheme = new BatchClientScheme(signer, {
      depositPolicy: { depositMultiplier: 10 },
      rpcUrl: stack.rpcUrl,
    });
    const client = new x402Client().register("eip155:*", scheme).setSpendControls({
      allowedAssets: [{ network: NETWORK, asset: USDG, maxAmountPerPayment: "1000000" }],
    });
    let sent: PaymentPayload | undefined;
    client.onAfterPaymentCreation(async ({ paymentPayload }) => {
      sent ??= paymentPayload;
    });
    const res = await wrapFetchWithPayment(fetch, client)(`${server!.origin}/tokens`);
    assert.equal(res.status, 200, await res.clone().text());
    assert.deepEqual(await res.json(), { tokens: 7 });
    assert.ok(
      sent?.extensions?.[ERC20_APPROVAL_GAS_SPONSORING.key],
      "the client signed an approve",
    );

    // On-chain: the payer approved Permit2 with its own nonce 0, the deposit
    // left the payer into the escrow, and the channel holds it.
    assert.equal(await publicClient.getTransactionCount({ address: payer.address }), 1);
    const allowance = await publicClient.readContract({
      address: USDG,
      abi: erc20Abi,
      functionName: "allowance",
      args: [payer.address, PERMIT2_ADDRESS],
    });
    assert.ok(allowance > 0n, "Permit2 is approved");
    assert.equal(await tokenBalance(stack.rpcUrl, USDG, payer.address), 100_000n - DEPOSIT);
    assert.equal(
      await tokenBalance(stack.rpcUrl, USDG, X402_BATCH_SETTLEMENT_ADDRESS),
      escrowBefore + DEPOSIT,
    );
    const channelId = (sent!.payload as { voucher: { channelId: Hex } }).voucher.channelId;
    const [balance] = (await readChannelBalanceAndTotalClaimed(signer, channelId)) as unknown as [
      bigint,
      bigint,
    ];
    assert.equal(balance, DEPOSIT, "the channel is funded with the deposit");

    // The settlement records the three transactions, all mined.
    const row = await stack.service.db
      .selectFrom("settlements")
      .selectAll()
      .where("scheme", "=", "batch-settlement")
      .where((eb) => eb(eb.fn("lower", ["payer"]), "=", payer.address.toLowerCase()))
      .executeTakeFirstOrThrow();
    assert.equal(row.status, "succeeded");
    const txs = await stack.service.db
      .selectFrom("settlement_transactions")
      .selectAll()
      .where("settlement_id", "=", row.id)
      .orderBy("created_at")
      .execute();
    assert.equal(txs.length, 3, JSON.stringify(txs.map((t) => t.detail)));
    const [fund, approve, deposit] = await Promise.all(
      txs.map((t) => publicClient.getTransaction({ hash: t.reference as Hex })),
    );
    assert.equal(fund!.to?.toLowerCase(), payer.address.toLowerCase());
    assert.equal(fund!.gas, 21_000n, "the funding is a plain transfer");
    assert.equal(approve!.from.toLowerCase(), payer.address.toLowerCase());
    assert.equal(deposit!.to?.toLowerCase(), X402_BATCH_SETTLEMENT_ADDRESS.toLowerCase());
    assert.equal(deposit!.hash, row.transaction);
    for (const t of txs) assert.equal(t.status, "success");
  });
});
