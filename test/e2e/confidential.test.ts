/**
 * Confidential settlement end to end on the devnet (spec 3.3-3.5, 4.6):
 * a merchant enables it from the dashboard API with a wallet signature, an
 * `@x402/express` resource server builds its 402 from GET /confidential/status
 * (both mode: the confidential offer first), an unmodified `@x402/fetch`
 * client pays the privacy contract, the receipt comes back and is listed,
 * the daily batch at a simulated midnight credits the encrypted slot, and
 * the merchant's wallet withdraws to its address. Also: the foreign-merchant
 * refusal and a plain payment to the contract, which would credit nobody.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { paymentMiddleware } from "@x402/express";
import { x402ResourceServer } from "@x402/core/server";
import { x402Client } from "@x402/core/client";
import { decodePaymentResponseHeader } from "@x402/core/http";
import { ExactEvmScheme as ExactEvmServerScheme } from "@x402/evm/exact/server";
import { ExactEvmScheme as ExactEvmClientScheme } from "@x402/evm/exact/client";
import { wrapFetchWithPayment } from "@x402/fetch";
import { createPublicClient, createTestClient, http, type Hex } from "viem";
import { sql } from "kysely";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { facilitatorClient, listenOnLoopback, type Listening } from "../support/resourceServer.js";
import { startStack, type TestStack } from "../support/stack.js";
import { signedInUser, type DashboardUser } from "../support/dashboardSession.js";
import { devnetWallet } from "../chains/evm/devnetChain.js";
import {
  paymentRequest,
  requirementsFor,
  signPayment,
  usdcBalance,
} from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { offersFor, type ConfidentialStatus } from "../../src/clients/confidential/offers.js";
import {
  cancelCall as cancelCall_,
  checkReceipt,
  receiptIn,
  redeemCall,
  vaultPaymentReader,
  type ConfidentialReceipt,
} from "../../src/clients/confidential/receipts.js";
import { keepReceipts, ReceiptStore } from "../../src/clients/confidential/receiptStore.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { utcDay } from "../../src/features/confidential/credits.js";
import {
  confidentialRequirements,
  enabledMerchant,
  withdrawTypedDataFromJson,
  pastNextMidnight,
} from "../chains/evm/confidential.js";

const PRICE = "$0.01";
const PRICE_ATOMIC = 10_000n;
const PLAIN_PAY_TO = "0x000000000000000000000000000000000000dEaD";

async function json<T = Record<string, unknown>>(res: Response): Promise<T> {
  return (await res.json()) as T;
}

describe("confidential settlement end to end", () => {
  let stack: TestStack;
  let merchantUser: DashboardUser;
  let merchantKey: string;
  const wallet = privateKeyToAccount(generatePrivateKey());
  let contract: Hex;
  let server: Listening | undefined;

  before(async () => {
    stack = await startStack({ confidential: true, confidentialWorker: false });
    contract = stack.service.confidential.vault!.address;
    // The merchant every payment test pays; the enablement flow itself is
    // tested on an account of its own.
    ({ user: merchantUser, apiKey: merchantKey } = await enabledMerchant(stack, wallet));
  });
  after(async () => {
    await server?.close();
    await stack?.stop();
  });

  const status = async (apiKey: string) => {
    const res = await fetch(`${stack.url}/confidential/status`, {
      headers: { "X-API-Key": apiKey },
    });
    assert.equal(res.status, 200);
    return json<ConfidentialStatus>(res);
  };

  /** A signed-in account of its own, with a key, not enabled. */
  const newMerchant = async () => {
    const user = await signedInUser(stack.service.db, stack.url);
    const key = (await createApiKey(stack.service.db, user.accountId, "shop")).key;
    return { user, key, wallet: privateKeyToAccount(generatePrivateKey()) };
  };

  test("before enabling: available, not configured, mode default", async () => {
    const { key } = await newMerchant();
    const s = await status(key);
    assert.deepEqual(s, {
      available: true,
      network: "eip155:8453",
      contractAddress: contract,
      configured: false,
      mode: "default",
      enabled: false,
      merchantAddress: "",
    });
    const unauth = await fetch(`${stack.url}/confidential/status`);
    assert.equal(unauth.status, 401);
  });

  test("enable with a wallet signature; the fee is shown first; the address is permanent", async () => {
    const { user: merchantUser, key: merchantKey, wallet } = await newMerchant();
    const info = await json<{ fee: { unitsPerSettlement: number; explanation: string } }>(
      await merchantUser.call("/api/confidential"),
    );
    assert.equal(info.fee.unitsPerSettlement, 2);
    assert.match(info.fee.explanation, /Payers pay exactly the advertised price/);

    const { message } = await json<{ message: string }>(
      await merchantUser.call(`/api/confidential/enablement-message?address=${wallet.address}`),
    );
    // Someone else's signature of the message is refused, and nothing is recorded.
    const impostor = privateKeyToAccount(generatePrivateKey());
    const refused = await merchantUser.call("/api/confidential/enable", {
      method: "POST",
      body: { address: wallet.address, signature: await impostor.signMessage({ message }) },
    });
    assert.equal(refused.status, 400);
    assert.equal((await status(merchantKey)).configured, false);

    // The wallet as the slot's viewer is refused: it is public and would name the merchant.
    const signature = await wallet.signMessage({ message });
    const named = await merchantUser.call("/api/confidential/enable", {
      method: "POST",
      body: { address: wallet.address, signature, viewer: wallet.address },
    });
    assert.equal(named.status, 400);
    const viewer = privateKeyToAccount(generatePrivateKey()).address;
    const res = await merchantUser.call("/api/confidential/enable", {
      method: "POST",
      body: { address: wallet.address, signature, viewer },
    });
    assert.equal(res.status, 200, await res.clone().text());
    const enabled = await json<{ slot: string; merchantAddress: string; viewer: string }>(res);
    assert.equal(enabled.merchantAddress, wallet.address);
    assert.match(enabled.slot, /^\d+$/);
    assert.equal(enabled.viewer, viewer);
    assert.equal(await stack.service.confidential.vault!.viewerOf(BigInt(enabled.slot)), viewer);

    // Another wallet cannot replace it, through the API or in the database.
    const other = privateKeyToAccount(generatePrivateKey());
    const otherMessage = (
      await json<{ message: string }>(
        await merchantUser.call(`/api/confidential/enablement-message?address=${other.address}`),
      )
    ).message;
    const again = await merchantUser.call("/api/confidential/enable", {
      method: "POST",
      body: {
        address: other.address,
        signature: await other.signMessage({ message: otherMessage }),
      },
    });
    assert.equal(again.status, 409);
    await assert.rejects(
      stack.service.db
        .updateTable("confidential_merchants")
        .set({ merchant_address: other.address.toLowerCase() })
        .where("account_id", "=", merchantUser.accountId)
        .execute(),
      /permanent/,
    );
    const s = await status(merchantKey);
    assert.equal(s.enabled, true);
    assert.equal(s.merchantAddress, wallet.address);
    assert.equal(s.mode, "both", "enabling offers both by default");
  });

  test("both-mode 402 lists the confidential offer first; a payment pays the contract and returns a receipt", async () => {
    const s = await status(merchantKey);
    // The merchant keeps every receipt in a file of its own as the answers arrive.
    const storeDir = mkdtempSync(join(tmpdir(), "receipts-"));
    const store = new ReceiptStore(join(storeDir, "receipts.jsonl"));
    const resourceServer = new x402ResourceServer(
      facilitatorClient({ ...stack, apiKey: merchantKey }),
    )
      .register("eip155:8453", new ExactEvmServerScheme())
      .onAfterSettle(keepReceipts(store));
    const app = express();
    app.use(
      paymentMiddleware(
        {
          "GET /report": {
            accepts: offersFor(s, {
              scheme: "exact",
              price: PRICE,
              network: "eip155:8453",
              payTo: PLAIN_PAY_TO,
            }),
            description: "A confidential report",
            mimeType: "application/json",
          },
        },
        resourceServer,
      ),
    );
    app.get("/report", (_req, res) => void res.json({ ok: true }));
    server = await listenOnLoopback(app);

    const unpaid = await fetch(`${server.origin}/report`);
    assert.equal(unpaid.status, 402);
    const required = JSON.parse(
      Buffer.from(unpaid.headers.get("PAYMENT-REQUIRED")!, "base64").toString(),
    ) as { accepts: { payTo: string; extra: Record<string, unknown>; amount: string }[] };
    assert.equal(required.accepts.length, 2);
    assert.equal(required.accepts[0]!.payTo, contract);
    assert.equal(required.accepts[0]!.extra["confidential"], true);
    assert.equal(required.accepts[0]!.extra["merchant"], wallet.address);
    assert.equal(required.accepts[1]!.payTo, PLAIN_PAY_TO);
    assert.equal(required.accepts[0]!.amount, required.accepts[1]!.amount, "same price both ways");

    const payer = privateKeyToAccount(stack.payerKeys[0]!);
    const before = await Promise.all([
      usdcBalance(stack.rpcUrl, stack.usdc, payer.address),
      usdcBalance(stack.rpcUrl, stack.usdc, contract),
    ]);
    const client = new x402Client().register("eip155:*", new ExactEvmClientScheme(payer));
    const paid = await wrapFetchWithPayment(fetch, client)(`${server.origin}/report`);
    assert.equal(paid.status, 200, await paid.clone().text());
    const settle = decodePaymentResponseHeader(paid.headers.get("PAYMENT-RESPONSE")!);
    assert.equal(settle.success, true);
    const after = await Promise.all([
      usdcBalance(stack.rpcUrl, stack.usdc, payer.address),
      usdcBalance(stack.rpcUrl, stack.usdc, contract),
    ]);
    assert.equal(before[0] - after[0], PRICE_ATOMIC, "the payer paid exactly the price");
    assert.equal(after[1] - before[1], PRICE_ATOMIC, "the contract holds it");

    const listed = await json<{
      receipts: { state: string; amount: string; receipt: ConfidentialReceipt | null }[];
    }>(await merchantUser.call("/api/confidential/receipts"));
    const mine = listed.receipts.filter((r) => r.receipt?.payer === payer.address);
    assert.equal(mine.length, 1);
    assert.equal(mine[0]!.state, "pending");
    assert.equal(mine[0]!.amount, PRICE_ATOMIC.toString());
    const receipt = mine[0]!.receipt!;
    assert.equal(receipt.amount, PRICE_ATOMIC.toString());
    assert.deepEqual(
      receiptIn(settle),
      receipt,
      "the settle answer carried the same receipt: the merchant holds it from the first moment",
    );
    // The merchant's side checks it from the chain alone: it opens the
    // commitment the vault stored for the payment, to its own slot.
    const { slot } = await json<{ slot: string }>(await merchantUser.call("/api/confidential"));
    const chain = createPublicClient({ transport: http(stack.rpcUrl) });
    const read = vaultPaymentReader(chain as never, contract);
    assert.equal(await checkReceipt(receipt, { vault: contract, slot: BigInt(slot) }, read), null);
    assert.match(
      (await checkReceipt(receipt, { vault: contract, slot: BigInt(slot) + 1n }, read)) ?? "",
      /slot/,
    );
    assert.deepEqual(store.all(), [receipt], "the resource server holds it too");
    rmSync(storeDir, { recursive: true, force: true });

    // Quota: a confidential settlement costs its tier's units.
    const row = await stack.service.db
      .selectFrom("settlements")
      .select(["status", "units"])
      .where("account_id", "=", merchantUser.accountId)
      .where("payer", "=", payer.address.toLowerCase())
      .executeTakeFirstOrThrow();
    assert.deepEqual(row, { status: "succeeded", units: 2 });
  });

  test("a confidential /verify of an enabled merchant reads its record once, then never again", async () => {
    const { merchants } = stack.service.confidential;
    let reads = 0;
    const find = merchants.find.bind(merchants);
    merchants.find = async (accountId) => {
      reads++;
      return find(accountId);
    };
    try {
      const requirements = confidentialRequirements({
        usdc: stack.usdc,
        vault: contract,
        merchant: wallet.address,
      });
      for (let i = 0; i < 3; i++) {
        const payload = await signPayment(stack.payerKeys[2]!, requirements);
        const verify = await json(
          await post(
            stack.url,
            "/verify",
            paymentRequest(requirements, payload.payload),
            merchantKey,
          ),
        );
        assert.equal(verify["isValid"], true, JSON.stringify(verify));
      }
      assert.ok(reads <= 1, `${reads} reads of the merchant record for three verifications`);
    } finally {
      merchants.find = find;
    }
  });

  test("a key of another account cannot settle to this merchant; a plain payment to the contract is refused", async () => {
    const stranger = await signedInUser(stack.service.db, stack.url);
    const strangerKey = (await createApiKey(stack.service.db, stranger.accountId, "x")).key;
    const requirements = confidentialRequirements({
      usdc: stack.usdc,
      vault: contract,
      merchant: wallet.address,
    });
    const payer = privateKeyToAccount(stack.payerKeys[1]!);
    const before = await usdcBalance(stack.rpcUrl, stack.usdc, payer.address);
    const payload = await signPayment(stack.payerKeys[1]!, requirements);
    const verify = await json(
      await post(stack.url, "/verify", paymentRequest(requirements, payload.payload), strangerKey),
    );
    assert.equal(verify["isValid"], false);
    assert.equal(verify["invalidReason"], "confidential_merchant_not_owned");
    const settle = await json(
      await post(stack.url, "/settle", paymentRequest(requirements, payload.payload), strangerKey),
    );
    assert.equal(settle["success"], false);
    assert.equal(settle["errorReason"], "confidential_merchant_not_owned");
    assert.equal(settle["transaction"], "");

    const plain = requirementsFor({ network: "eip155:8453", usdc: stack.usdc, payTo: contract });
    const plainPayload = await signPayment(stack.payerKeys[1]!, plain);
    const plainSettle = await json(
      await post(stack.url, "/settle", paymentRequest(plain, plainPayload.payload), merchantKey),
    );
    assert.equal(plainSettle["errorReason"], "invalid_confidential_offer");

    assert.equal(
      await usdcBalance(stack.rpcUrl, stack.usdc, payer.address),
      before,
      "nothing moved",
    );
    const failed = await stack.service.db
      .selectFrom("settlements")
      .select("error_reason")
      .where("status", "=", "failed")
      .where("payer", "=", payer.address.toLowerCase())
      .execute();
    assert.deepEqual(
      failed.map((f) => f.error_reason).sort(),
      ["confidential_merchant_not_owned", "invalid_confidential_offer"],
      "every refusal is recorded",
    );
  });

  test("a confidential offer paid with something other than an EIP-3009 authorization is a 4xx or a refusal, never a 500", async () => {
    const requirements = confidentialRequirements({
      usdc: stack.usdc,
      vault: contract,
      merchant: wallet.address,
    });
    const credits = () =>
      stack.service.db
        .selectFrom("confidential_credits")
        .select("authorization_key")
        .where("account_id", "=", merchantUser.accountId)
        .execute();
    const creditsBefore = (await credits()).length;
    const shapes: Record<string, unknown>[] = [
      { permit2Authorization: { from: wallet.address }, signature: "0x" },
      { authorization: { from: "not an address", nonce: "0x01" }, signature: "0x" },
      {},
    ];
    for (const payload of shapes) {
      for (const path of ["/verify", "/settle"]) {
        const res = await post(stack.url, path, paymentRequest(requirements, payload), merchantKey);
        assert.ok(
          res.status === 200 || (res.status >= 400 && res.status < 500),
          `${path}: ${res.status}`,
        );
        const body = await json(res);
        assert.notEqual(body["success"], true);
        assert.notEqual(body["isValid"], true);
      }
    }
    assert.equal((await credits()).length, creditsBefore, "no credit is owed for any of them");
  });

  test("the credit cannot be written once the payment settled: the success stands, and the sweep writes credit and receipt from the settlement record", async () => {
    const { db } = stack.service;
    const requirements = confidentialRequirements({
      usdc: stack.usdc,
      vault: contract,
      merchant: wallet.address,
    });
    const payer = privateKeyToAccount(stack.payerKeys[3]!);
    const payload = await signPayment(stack.payerKeys[3]!, requirements);
    // The credits table out of reach, as an outage would leave it.
    await sql`alter table confidential_credits rename to confidential_credits_away`.execute(db);
    let res: Response;
    try {
      res = await post(
        stack.url,
        "/settle",
        paymentRequest(requirements, payload.payload),
        merchantKey,
      );
    } finally {
      await sql`alter table confidential_credits_away rename to confidential_credits`.execute(db);
    }
    assert.equal(res.status, 200);
    const body = await json<{ success: boolean; extensions?: Record<string, unknown> }>(res);
    assert.equal(body.success, true, "the money moved: the answer says so");
    assert.equal(body.extensions?.["confidential"], undefined, "no receipt could be signed yet");
    const credit = () =>
      db
        .selectFrom("confidential_credits")
        .select(["amount", "receipt"])
        .where("payer", "=", payer.address.toLowerCase())
        .where("account_id", "=", merchantUser.accountId)
        .execute();
    assert.deepEqual(await credit(), []);
    assert.equal(
      await stack.service.confidential.credits!.sweep(new Date(Date.now() - 3_600_000)),
      1,
    );
    const [written] = await credit();
    assert.equal(written?.amount, PRICE_ATOMIC.toString());
    assert.equal(
      (written?.receipt as ConfidentialReceipt | null)?.amount,
      PRICE_ATOMIC.toString(),
      "the receipt: the opening of the commitment the vault stored",
    );
  });

  test("the batch at a simulated midnight credits the slot once; the wallet withdraws to its address", async () => {
    const vault = stack.service.confidential.vault!;
    const { db } = stack.service;
    const slot = BigInt(
      (await json<{ slot: string }>(await merchantUser.call("/api/confidential"))).slot,
    );
    const requirements = confidentialRequirements({
      usdc: stack.usdc,
      vault: contract,
      merchant: wallet.address,
    });
    const payload = await signPayment(stack.payerKeys[4]!, requirements);
    const paid = await json(
      await post(stack.url, "/settle", paymentRequest(requirements, payload.payload), merchantKey),
    );
    assert.equal(paid["success"], true, JSON.stringify(paid));
    assert.equal(await vault.balance(slot), 0n, "pending is not available");
    // What the merchant is owed: this payment, and any other of the day.
    const owedRows = await db
      .selectFrom("confidential_credits as c")
      .innerJoin("settlements as s", "s.authorization_key", "c.authorization_key")
      .select("c.amount")
      .where("c.account_id", "=", merchantUser.accountId)
      .where("s.status", "=", "succeeded")
      .where("c.credited_day", "is", null)
      .execute();
    const owed = owedRows.reduce((sum, r) => sum + BigInt(r.amount), 0n);
    assert.ok(owed >= PRICE_ATOMIC);

    // Move the chain and the service's clock past the next 00:00 UTC.
    const now = await pastNextMidnight(stack.rpcUrl, vault, 60);
    const batch = stack.service.confidential.batch!;
    const day = utcDay(now) - 1;
    const first = await batch.run(day, now);
    assert.equal(first.ran, true);
    assert.equal(await vault.balance(slot), owed);
    const second = await batch.run(day, now);
    assert.deepEqual(second, { ran: false, day, why: "done" });
    assert.equal(await vault.balance(slot), owed, "credited once");
    const listed = await json<{ receipts: { state: string }[] }>(
      await merchantUser.call("/api/confidential/receipts"),
    );
    assert.deepEqual(
      listed.receipts.map((r) => r.state),
      listed.receipts.map(() => "available"),
    );

    const withdraw = async (amount: bigint) => {
      const { typedData } = await json<{ typedData: Record<string, unknown> }>(
        await merchantUser.call("/api/confidential/withdrawals/request", {
          method: "POST",
          body: { amount: amount.toString() },
        }),
      );
      const signature = await wallet.signTypedData(withdrawTypedDataFromJson(typedData));
      const res = await merchantUser.call("/api/confidential/withdrawals", {
        method: "POST",
        body: { typedData, signature },
      });
      assert.equal(res.status, 200, await res.clone().text());
      return json<{ state: string; paidAmount: string }>(res);
    };

    // Above the available balance: nothing moves.
    const tooMuch = await withdraw(owed + 1n);
    assert.deepEqual([tooMuch.state, tooMuch.paidAmount], ["finalized", "0"]);
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, wallet.address), 0n);

    const done = await withdraw(owed);
    assert.deepEqual([done.state, done.paidAmount], ["finalized", owed.toString()]);
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, wallet.address), owed);
    assert.equal(await vault.balance(slot), 0n);
  });

  test("the tab: available and pending balance; a receipt of a day not closed is redeemed, and a stalled withdrawal cancelled, by the wallet with transactions built from receipts and ids alone", async () => {
    const vault = stack.service.confidential.vault!;
    const { db } = stack.service;
    const chain = createPublicClient({ transport: http(stack.rpcUrl) });
    const testClient = createTestClient({ mode: "anvil", transport: http(stack.rpcUrl) });
    await testClient.setBalance({ address: wallet.address, value: 10n ** 18n });
    const fromWallet = devnetWallet(wallet, stack.rpcUrl, 8453);
    /** What the dashboard does: the wallet sends a call the tab built itself. */
    const send = async (call: { to: Hex; data: Hex }) => {
      const hash = await fromWallet.sendTransaction({
        to: call.to,
        data: call.data,
        gas: 1_000_000n,
      });
      return (await chain.waitForTransactionReceipt({ hash })).status;
    };
    const balance = async () =>
      json<{ available: string; pending: string }>(
        await merchantUser.call("/api/confidential/balance"),
      );
    const before = await balance();

    // A payment; its day's batch does not run.
    const requirements = {
      ...confidentialRequirements({ usdc: stack.usdc, vault: contract, merchant: wallet.address }),
      maxTimeoutSeconds: 3 * 86_400, // valid on the chain's clock, which the tests moved ahead
    };
    const payload = await signPayment(stack.payerKeys[0]!, requirements);
    const paid = await json(
      await post(stack.url, "/settle", paymentRequest(requirements, payload.payload), merchantKey),
    );
    assert.equal(paid["success"], true, JSON.stringify(paid));
    assert.deepEqual(await balance(), {
      available: before.available,
      availableError: null,
      pending: (BigInt(before.pending) + PRICE_ATOMIC).toString(),
    });
    const nonce = (payload.payload as { authorization: { nonce: string } }).authorization.nonce;
    const listed = await json<{
      receipts: {
        paymentNonce: string;
        receipt: ConfidentialReceipt | null;
        redeemableFrom: string;
      }[];
    }>(await merchantUser.call("/api/confidential/receipts"));
    const entry = listed.receipts.find((r) => r.paymentNonce === nonce)!;
    const redemption = redeemCall(contract, entry.receipt!);
    assert.equal(await send(redemption), "reverted", "the batch's turn first");

    // A day after the day ended, the wallet redeems it itself.
    await pastNextMidnight(stack.rpcUrl, vault);
    await pastNextMidnight(stack.rpcUrl, vault);
    assert.ok(Date.parse(entry.redeemableFrom) <= Number(await vault.chainTime()) * 1000);
    assert.equal(await send(redemption), "success");
    assert.equal((await balance()).available, (BigInt(before.available) + PRICE_ATOMIC).toString());
    assert.equal(await send(redemption), "reverted", "redeemed already");

    // A withdrawal whose finalization stalls (the worker is off here).
    const slot = BigInt(
      (await json<{ slot: string }>(await merchantUser.call("/api/confidential")))["slot"],
    );
    const { request, typedData } = await vault.prepareWithdraw({
      slot,
      merchant: wallet.address,
      amount: 4_000n,
    });
    const secret = (
      await db
        .selectFrom("confidential_merchants")
        .select("slot_secret")
        .where("account_id", "=", merchantUser.accountId)
        .executeTakeFirstOrThrow()
    ).slot_secret as Hex;
    const { withdrawalId } = await vault.submitWithdraw({
      request,
      secret,
      signature: await wallet.signTypedData(typedData),
    });
    const id = crypto.randomUUID();
    await db
      .insertInto("confidential_withdrawals")
      .values({
        id,
        account_id: merchantUser.accountId,
        amount: "4000",
        request: JSON.stringify({}),
        signature: "0x",
        state: "debited",
        onchain_id: withdrawalId.toString(),
      })
      .execute();
    const cancelCall = () =>
      merchantUser.call(`/api/confidential/withdrawals/${id}/cancel`, { method: "POST" });
    assert.equal((await cancelCall()).status, 409, "not before 24 hours");
    await testClient.increaseTime({ seconds: 86_400 + 60 });
    await testClient.mine({ blocks: 1 });
    const cancel = await cancelCall();
    assert.equal(cancel.status, 200, await cancel.clone().text());
    const { from, withdrawalId: onchain } = await json<{ from: string; withdrawalId: string }>(
      cancel,
    );
    assert.equal(from, wallet.address);
    assert.equal(await send(cancelCall_(contract, BigInt(onchain))), "success");
    assert.equal((await vault.withdrawal(withdrawalId)).state, "cancelled");
    assert.equal(
      (await balance()).available,
      (BigInt(before.available) + PRICE_ATOMIC).toString(),
      "the debit is undone",
    );
  });
});
