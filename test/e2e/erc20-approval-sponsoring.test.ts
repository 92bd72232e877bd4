/**
 * `erc20ApprovalGasSponsoring`, end to end, from a cold start: a payer who
 * holds USDG (a plain ERC-20: no EIP-3009, no EIP-2612) and not a wei of
 * gas, and has never approved Permit2, pays a resource through Permit2 with
 * `exact` and with `upto`. The official `@x402/evm` client, told by the
 * resource server that the extension is on offer, signs an ordinary
 * `approve(Permit2, max)` transaction next to its Permit2 authorization.
 * This service funds the payer's gas, broadcasts the approve, then
 * settles, and the settlement records all three transactions. A second
 * presentation of the same payment sends nothing; an approve the payer
 * cannot have meant (too small, a stale nonce, a fee above what we pay) is
 * refused at /verify with its reason. Sponsoring funds an approve and
 * nothing else: an honest cold payer keeps at most 40% of the funding, a
 * payer with code (an EIP-7702 delegation forwarding its ETH away) is never
 * funded, an over-priced approve is refused, and a payer funded once whose
 * payment did not settle is not funded again.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { paymentMiddleware, setSettlementOverrides } from "@x402/express";
import { x402ResourceServer } from "@x402/core/server";
import { x402Client, x402HTTPClient } from "@x402/core/client";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { ExactEvmScheme as ExactEvmServerScheme } from "@x402/evm/exact/server";
import { ExactEvmScheme as ExactEvmClientScheme } from "@x402/evm/exact/client";
import { UptoEvmScheme as UptoEvmServerScheme } from "@x402/evm/upto/server";
import { UptoEvmScheme as UptoEvmClientScheme } from "@x402/evm/upto/client";
import {
  PERMIT2_ADDRESS,
  toClientEvmSigner,
  x402ExactPermit2ProxyAddress,
  x402UptoPermit2ProxyAddress,
} from "@x402/evm";
import {
  declareErc20ApprovalGasSponsoringExtension,
  ERC20_APPROVAL_GAS_SPONSORING,
} from "@x402/extensions";
import { wrapFetchWithPayment } from "@x402/fetch";
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import {
  createPublicClient,
  createTestClient,
  createWalletClient,
  encodeFunctionData,
  erc20Abi,
  http,
  maxUint256,
  type Hex,
  type PublicClient,
} from "viem";
import { facilitatorClient, listenOnLoopback, type Listening } from "../support/resourceServer.js";
import { devnetChain, newPayerWithoutGas } from "../chains/evm/devnetChain.js";
import { startStack, type TestStack } from "../support/stack.js";
import { usdcBalance as tokenBalance } from "../chains/evm/payments.js";

const NETWORK = "eip155:4663";
const CHAIN_ID = 4663;
const USDG = "0xe343167631d89B6Ffc58B88d6b7fB0228795491D" as const;
const PAY_TO = "0x0000000000000000000000000000000000005a5a" as const;
const PRICE = 3_000n; // the exact price and the upto maximum
const USED = 1_200n; // what the metered request turned out to cost

describe("erc20ApprovalGasSponsoring: a payer with no gas and no allowance pays through Permit2", () => {
  let stack: TestStack;
  let server: Listening | undefined;
  let origin: string;
  let publicClient: PublicClient;

  before(async () => {
    stack = await startStack({ networks: [NETWORK] });
    publicClient = createPublicClient({ transport: http(stack.rpcUrl) });
    const resourceServer = new x402ResourceServer(facilitatorClient(stack))
      .register(NETWORK, new ExactEvmServerScheme())
      .register(NETWORK, new UptoEvmServerScheme());
    const app = express();
    const price = {
      amount: PRICE.toString(),
      asset: USDG,
      extra: { assetTransferMethod: "permit2", name: "Global Dollar", version: "1" },
    };
    app.use(
      paymentMiddleware(
        {
          "GET /data": {
            accepts: { scheme: "exact", network: NETWORK, payTo: PAY_TO, price },
            description: "Data paid in USDG, approval gas sponsored",
            mimeType: "application/json",
            extensions: { ...declareErc20ApprovalGasSponsoringExtension() },
          },
          "GET /metered": {
            accepts: { scheme: "upto", network: NETWORK, payTo: PAY_TO, price },
            description: "Metered in USDG up to the price, approval gas sponsored",
            mimeType: "application/json",
            extensions: { ...declareErc20ApprovalGasSponsoringExtension() },
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

  /** A brand-new payer: USDG from a devnet payer, no ETH at all, no Permit2 approval. */
  async function coldPayer(tokens = 100_000n): Promise<PrivateKeyAccount> {
    if (tokens === 0n) return privateKeyToAccount(generatePrivateKey());
    const payer = await newPayerWithoutGas(stack, USDG, tokens);
    assert.equal(await allowanceOf(payer.address), 0n, "no Permit2 approval yet");
    return payer;
  }

  /** USDG is not an @x402/evm default asset: the payer opts in to it, with a cap. */
  const payingClient = (scheme: ExactEvmClientScheme | UptoEvmClientScheme) =>
    new x402Client().register("eip155:*", scheme).setSpendControls({
      allowedAssets: [{ network: NETWORK, asset: USDG, maxAmountPerPayment: "10000" }],
    });

  const allowanceOf = (owner: Hex) =>
    publicClient.readContract({
      address: USDG,
      abi: erc20Abi,
      functionName: "allowance",
      args: [owner, PERMIT2_ADDRESS],
    });

  /** The settlement's journaled transactions, oldest first. */
  async function journaled(transaction: string) {
    const row = await stack.service.db
      .selectFrom("settlements")
      .selectAll()
      .where("transaction", "=", transaction)
      .executeTakeFirstOrThrow();
    const txs = await stack.service.db
      .selectFrom("settlement_transactions")
      .selectAll()
      .where("settlement_id", "=", row.id)
      .orderBy("created_at")
      .execute();
    return { row, txs };
  }

  /** Funding (ours, to the payer), the payer's approve, then the settlement (ours, to the proxy). */
  async function assertThreeTransactions(
    payer: Hex,
    settlement: string,
    proxy: string,
  ): Promise<void> {
    const { row, txs } = await journaled(settlement);
    assert.equal(row.status, "succeeded");
    // The final row keeps the payment's facts, not the payer's signed approve.
    const info = (
      row.request as {
        paymentPayload: { extensions: Record<string, { info: Record<string, unknown> }> };
      }
    ).paymentPayload.extensions["erc20ApprovalGasSponsoring"]!.info;
    assert.equal(info["from"], payer, "the extension's facts are kept");
    assert.equal(info["signedTransaction"], undefined, "the signed approve is not kept at rest");
    assert.equal(txs.length, 3, JSON.stringify(txs.map((t) => t.detail)));
    const [funding, approve, settle] = await Promise.all(
      txs.map((t) => publicClient.getTransaction({ hash: t.reference as Hex })),
    );
    assert.equal(funding!.to?.toLowerCase(), payer.toLowerCase());
    assert.ok(funding!.value > 0n, "the payer's gas was funded");
    assert.equal(approve!.from.toLowerCase(), payer.toLowerCase());
    assert.equal(approve!.to?.toLowerCase(), USDG.toLowerCase());
    assert.equal(txs[1]!.signer, null, "the approve is the payer's, not one of our accounts");
    assert.equal(settle!.hash, settlement);
    assert.equal(settle!.to?.toLowerCase(), proxy.toLowerCase());
    for (const t of txs) assert.equal(t.status, "success");
  }

  test("GET /supported lists erc20ApprovalGasSponsoring", async () => {
    const res = await fetch(`${stack.url}/supported`);
    const body = (await res.json()) as { extensions: string[] };
    assert.ok(body.extensions.includes(ERC20_APPROVAL_GAS_SPONSORING.key), body.extensions.join());
  });

  /** Our signers' native balance on the network, summed: what their gas cost shows in. */
  async function oursInWei(): Promise<bigint> {
    const supported = (await (await fetch(`${stack.url}/supported`)).json()) as {
      signers: Record<string, string[]>;
    };
    const balances = await Promise.all(
      supported.signers["eip155"]!.map((a) => publicClient.getBalance({ address: a as Hex })),
    );
    return balances.reduce((x, y) => x + y, 0n);
  }

  test("exact: cold payer; funding, approve and settle are sent and recorded, a replay sends nothing", async (t) => {
    const payer = await coldPayer();
    const payToBefore = await tokenBalance(stack.rpcUrl, USDG, PAY_TO);
    const client = payingClient(new ExactEvmClientScheme(toClientEvmSigner(payer, publicClient)));
    let sent: PaymentPayload | undefined;
    client.onAfterPaymentCreation(async ({ paymentPayload }) => {
      sent = paymentPayload;
    });
    const res = await wrapFetchWithPayment(fetch, client)(`${origin}/data`);
    assert.equal(res.status, 200, await res.clone().text());
    const receipt = new x402HTTPClient(client).getPaymentSettleResponse((n) => res.headers.get(n));
    assert.equal(receipt.success, true);
    assert.ok(
      sent?.extensions?.[ERC20_APPROVAL_GAS_SPONSORING.key],
      "the client signed an approve",
    );

    assert.equal(await tokenBalance(stack.rpcUrl, USDG, PAY_TO), payToBefore + PRICE);
    assert.equal(await tokenBalance(stack.rpcUrl, USDG, payer.address), 100_000n - PRICE);
    assert.equal(await publicClient.getTransactionCount({ address: payer.address }), 1);
    await assertThreeTransactions(payer.address, receipt.transaction, x402ExactPermit2ProxyAddress);

    // What the payer kept of the funding: whatever its approve did not burn.
    const { txs } = await journaled(receipt.transaction);
    const funding = await publicClient.getTransaction({ hash: txs[0]!.reference as Hex });
    assert.equal(funding.gas, 21_000n, "the funding is a plain transfer");
    const approveReceipt = await publicClient.getTransactionReceipt({
      hash: txs[1]!.reference as Hex,
    });
    const kept = await publicClient.getBalance({ address: payer.address });
    assert.equal(kept, funding.value - approveReceipt.gasUsed * approveReceipt.effectiveGasPrice);
    // The funding was sized at the base fee of the block before it; this
    // devnet's near-empty blocks then lower the base fee 12.5% a block, and
    // what the approve saves by that is the payer's too. At the base fee it
    // was funded at, the payer keeps at most 40%.
    const [checkedAt, approvedIn] = await Promise.all([
      publicClient.getBlock({ blockNumber: funding.blockNumber! - 1n }),
      publicClient.getBlock({ blockNumber: approveReceipt.blockNumber }),
    ]);
    const fall = checkedAt.baseFeePerGas! - approvedIn.baseFeePerGas!;
    const keptAtFundedFee = kept - approveReceipt.gasUsed * fall;
    const percent = (x: bigint) => Number((x * 10_000n) / funding.value) / 100;
    t.diagnostic(
      `funded ${funding.value} wei; the approve used ${approveReceipt.gasUsed} gas at ${approveReceipt.effectiveGasPrice}; the payer kept ${kept} (${percent(kept)}%), ${percent(keptAtFundedFee)}% at the base fee it was funded at`,
    );
    assert.ok(percent(keptAtFundedFee) <= 40, `the payer kept ${percent(keptAtFundedFee)}%`);
    assert.ok(percent(kept) < 45, `the payer kept ${percent(kept)}%`);

    // The same payment again: answered without a second approve or funding.
    const balance = await publicClient.getBalance({ address: payer.address });
    const again = await settle(sent!);
    assert.equal(again.success, false);
    assert.equal(await publicClient.getTransactionCount({ address: payer.address }), 1);
    assert.equal(await publicClient.getBalance({ address: payer.address }), balance);
  });

  test("upto: cold payer signs a maximum; the approve is relayed and only the amount used moves", async () => {
    const payer = await coldPayer();
    const payToBefore = await tokenBalance(stack.rpcUrl, USDG, PAY_TO);
    const client = payingClient(new UptoEvmClientScheme(toClientEvmSigner(payer, publicClient)));
    const res = await wrapFetchWithPayment(fetch, client)(`${origin}/metered`);
    assert.equal(res.status, 200, await res.clone().text());
    const receipt = new x402HTTPClient(client).getPaymentSettleResponse((n) => res.headers.get(n));
    assert.equal(receipt.success, true);
    assert.equal(receipt.amount, USED.toString());
    assert.equal(await tokenBalance(stack.rpcUrl, USDG, PAY_TO), payToBefore + USED);
    assert.equal(await tokenBalance(stack.rpcUrl, USDG, payer.address), 100_000n - USED);
    await assertThreeTransactions(payer.address, receipt.transaction, x402UptoPermit2ProxyAddress);
  });

  /** What the official client puts in a payment for `/data`, and the requirements it answers. */
  async function signedPayment(payer: PrivateKeyAccount) {
    const first = await fetch(`${origin}/data`);
    const httpClient = new x402HTTPClient(
      payingClient(new ExactEvmClientScheme(toClientEvmSigner(payer, publicClient))),
    );
    const required = httpClient.getPaymentRequiredResponse(
      (n) => first.headers.get(n),
      await first.json(),
    );
    const payload = await httpClient.createPaymentPayload(required);
    return { payload, requirements: payload.accepted };
  }

  async function call(path: "verify" | "settle", body: unknown) {
    const res = await fetch(`${stack.url}/${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": stack.apiKey },
      body: JSON.stringify(body),
    });
    return (await res.json()) as Record<string, unknown>;
  }

  function settle(payload: PaymentPayload) {
    return call("settle", {
      x402Version: 2,
      paymentPayload: payload,
      paymentRequirements: payload.accepted,
    });
  }

  /** Replaces the payment's signed approve with one the payer signs now from `tx`. */
  async function withApprove(
    payer: PrivateKeyAccount,
    payload: PaymentPayload,
    tx: { amount: bigint; nonce?: number; gas?: bigint; maxFeePerGas?: bigint; tip?: bigint },
  ): Promise<PaymentPayload> {
    const key = ERC20_APPROVAL_GAS_SPONSORING.key;
    const info = (payload.extensions![key] as { info: Record<string, unknown> }).info;
    const signedTransaction = await payer.signTransaction({
      chainId: CHAIN_ID,
      type: "eip1559",
      to: USDG,
      data: encodeFunctionData({
        abi: erc20Abi,
        functionName: "approve",
        args: [PERMIT2_ADDRESS, tx.amount],
      }),
      nonce: tx.nonce ?? 0,
      gas: tx.gas ?? 70_000n,
      maxFeePerGas: tx.maxFeePerGas ?? 2_000_000_000n,
      maxPriorityFeePerGas: tx.tip ?? 1_000_000n,
    });
    return {
      ...payload,
      extensions: {
        ...payload.extensions,
        [key]: {
          info: {
            ...info,
            from: payer.address,
            asset: USDG,
            spender: PERMIT2_ADDRESS,
            amount: tx.amount.toString(),
            signedTransaction,
            version: "1",
          },
        },
      },
    };
  }

  test("an approve below the payment, with a stale nonce, or a fee above ours is refused at /verify, and nothing is sent", async () => {
    const payer = await coldPayer();
    const { payload, requirements } = await signedPayment(payer);
    const verify = (p: PaymentPayload) =>
      call("verify", { x402Version: 2, paymentPayload: p, paymentRequirements: requirements });

    const valid = await verify(payload);
    assert.equal(valid["isValid"], true, JSON.stringify(valid));

    const small = await verify(await withApprove(payer, payload, { amount: PRICE - 1n }));
    assert.equal(small["invalidReason"], "erc20_approval_amount_insufficient");
    const stale = await verify(await withApprove(payer, payload, { amount: PRICE, nonce: 3 }));
    assert.equal(stale["invalidReason"], "erc20_approval_tx_nonce_mismatch");
    const dear = await verify(
      await withApprove(payer, payload, { amount: PRICE, maxFeePerGas: 10n ** 15n }),
    );
    assert.equal(dear["invalidReason"], "erc20_approval_tx_fee_too_high");
    const dearSettle = await settle(
      await withApprove(payer, payload, { amount: PRICE, maxFeePerGas: 10n ** 15n }),
    );
    assert.equal(dearSettle["errorReason"], "erc20_approval_tx_fee_too_high");

    // Verifying sent nothing: no funding, no approve.
    assert.equal(await publicClient.getBalance({ address: payer.address }), 0n);
    assert.equal(await publicClient.getTransactionCount({ address: payer.address }), 0);
    assert.equal(await allowanceOf(payer.address), 0n);
    void (requirements satisfies PaymentRequirements);
  });

  test("a payer delegated (EIP-7702) to a forwarder is never funded: three tries, no funding, none of our gas", async (t) => {
    const payer = await coldPayer();
    const sink = privateKeyToAccount(generatePrivateKey()).address;
    // The delegate answers every call with the ERC-1271 magic value, so
    // the payer's signatures check out; a plain transfer to it forwards
    // every wei to the sink, then burns about 1.3M gas in a loop.
    const forwarder = privateKeyToAccount(generatePrivateKey()).address;
    const testClient = createTestClient({ mode: "anvil", transport: http(stack.rpcUrl) });
    await testClient.setCode({
      address: forwarder,
      bytecode: `0x36603057${"5f".repeat(4)}4773${sink.slice(2)}5af1506200c3505b600190038060255750005b631626ba7e60e01b5f5260205ff3`,
    });
    const payments = [await signedPayment(payer), await signedPayment(payer)];
    await testClient.setCode({
      address: payer.address,
      bytecode: `0xef0100${forwarder.slice(2)}`,
    });
    const before = await oursInWei();
    const answers = [];
    for (const p of [...payments, payments[0]!]) answers.push(await settle(p.payload));
    for (const a of answers) {
      assert.equal(a["success"], false, JSON.stringify(a));
      assert.equal(a["errorReason"], "erc20_approval_payer_has_code", JSON.stringify(a));
    }
    const spent = before - (await oursInWei());
    t.diagnostic(`3 settles: 0 fundings, our gas ${spent} wei, the sink got 0`);
    assert.equal(spent, 0n, "none of our gas was spent");
    assert.equal(await publicClient.getBalance({ address: sink }), 0n);
    assert.equal(await publicClient.getBalance({ address: payer.address }), 0n);
    const fundings = await stack.service.db
      .selectFrom("sponsored_fundings")
      .selectAll()
      .where("payer", "=", payer.address.toLowerCase())
      .execute();
    assert.equal(fundings.length, 0);
  });

  test("an over-priced approve is refused with its reason and nothing is sent", async () => {
    const payer = await coldPayer();
    const { payload, requirements } = await signedPayment(payer);
    const block = await publicClient.getBlock();
    const base = block.baseFeePerGas!;
    const cases: [string, { gas?: bigint; maxFeePerGas?: bigint; tip?: bigint }][] = [
      // The probe of the review: 100,000 gas at twice the base fee.
      ["erc20_approval_tx_gas_too_high", { gas: 100_000n, maxFeePerGas: 2n * base, tip: 0n }],
      // The official client's gas limit, at twice the base fee with no tip.
      ["erc20_approval_tx_overpriced", { gas: 70_000n, maxFeePerGas: 2n * base, tip: 0n }],
    ];
    for (const [reason, tx] of cases) {
      const p = await withApprove(payer, payload, { amount: maxUint256, ...tx });
      const body = { x402Version: 2, paymentPayload: p, paymentRequirements: requirements };
      const verified = await call("verify", body);
      assert.equal(verified["invalidReason"], reason, JSON.stringify(verified));
      assert.match(String(verified["invalidMessage"]), /gas|fund/);
      const settled = await settle(p);
      assert.equal(settled["errorReason"], reason, JSON.stringify(settled));
    }
    assert.equal(await publicClient.getBalance({ address: payer.address }), 0n);
    assert.equal(await publicClient.getTransactionCount({ address: payer.address }), 0);
  });

  test("a payer funded once whose payment did not settle is not funded again", async () => {
    const payer = await coldPayer();
    const first = await settle((await signedPayment(payer)).payload);
    assert.equal(first["success"], true, JSON.stringify(first));
    const { row } = await journaled(String(first["transaction"]));
    // Stands for a settle that failed after its approve was mined (the
    // payer moved its tokens, or used its Permit2 nonce, in between).
    await stack.service.db
      .updateTable("settlements")
      .set({ status: "failed" })
      .where("id", "=", row.id)
      .execute();
    // The payer resets the allowance (with gas of its own), holds no gas
    // again, and asks for another funding.
    const testClient = createTestClient({ mode: "anvil", transport: http(stack.rpcUrl) });
    await testClient.setBalance({ address: payer.address, value: 10n ** 16n });
    const payerWallet = createWalletClient({
      account: payer,
      chain: devnetChain(CHAIN_ID, stack.rpcUrl),
      transport: http(stack.rpcUrl),
    });
    const reset = await payerWallet.writeContract({
      address: USDG,
      abi: erc20Abi,
      functionName: "approve",
      args: [PERMIT2_ADDRESS, 0n],
    });
    await publicClient.waitForTransactionReceipt({ hash: reset });
    await testClient.setBalance({
      address: payer.address,
      value: 0n,
    });
    const before = await oursInWei();
    const again = await signedPayment(payer);
    const verified = await call("verify", {
      x402Version: 2,
      paymentPayload: again.payload,
      paymentRequirements: again.requirements,
    });
    assert.equal(verified["invalidReason"], "erc20_approval_payer_already_funded");
    const answer = await settle(again.payload);
    assert.equal(answer["errorReason"], "erc20_approval_payer_already_funded");
    assert.equal(await oursInWei(), before, "nothing was sent");
    assert.equal(await publicClient.getBalance({ address: payer.address }), 0n);
  });

  test("a settle sent without a verify, for a payer who holds none of the tokens, funds nothing and sends nothing", async () => {
    const payer = await coldPayer(0n);
    const { payload } = await signedPayment(payer);
    const answer = await settle(payload);
    assert.equal(answer["success"], false, JSON.stringify(answer));
    assert.equal(answer["errorReason"], "insufficient_funds");
    assert.equal(await publicClient.getBalance({ address: payer.address }), 0n, "no gas funded");
    assert.equal(await publicClient.getTransactionCount({ address: payer.address }), 0);
    assert.equal(await allowanceOf(payer.address), 0n);
  });

  test("two payments of one cold payer settled at once: one approve goes out, both are paid", async () => {
    const payer = await coldPayer();
    const payToBefore = await tokenBalance(stack.rpcUrl, USDG, PAY_TO);
    // Both signed before either settles: each carries an approve at nonce 0.
    const [first, second] = [await signedPayment(payer), await signedPayment(payer)];
    const answers = await Promise.all([settle(first.payload), settle(second.payload)]);
    for (const a of answers) assert.equal(a["success"], true, JSON.stringify(a));
    assert.equal(await publicClient.getTransactionCount({ address: payer.address }), 1);
    assert.equal(await tokenBalance(stack.rpcUrl, USDG, PAY_TO), payToBefore + 2n * PRICE);
  });

  test("an approve the payment does not need (Permit2 already allowed) is never sent", async () => {
    const payer = await coldPayer();
    const first = await signedPayment(payer);
    const paid = await settle(first.payload);
    assert.equal(paid["success"], true, JSON.stringify(paid));
    assert.equal(await publicClient.getTransactionCount({ address: payer.address }), 1);

    // The client signs no approve now (the allowance covers); one attached
    // anyway, valid in every other way, is not relayed.
    const second = await signedPayment(payer);
    const echoed = second.payload.extensions?.[ERC20_APPROVAL_GAS_SPONSORING.key] as
      { info?: { signedTransaction?: string } } | undefined;
    assert.equal(echoed?.info?.signedTransaction, undefined);
    const balance = await publicClient.getBalance({ address: payer.address });
    const needless = await withApprove(payer, second.payload, { amount: PRICE, nonce: 1 });
    const again = await settle(needless);
    assert.equal(again["success"], true, JSON.stringify(again));
    assert.equal(await publicClient.getTransactionCount({ address: payer.address }), 1);
    assert.equal(await publicClient.getBalance({ address: payer.address }), balance);
    const { txs } = await journaled(String(again["transaction"]));
    assert.equal(txs.length, 1, "only the settlement was sent");
  });
});
