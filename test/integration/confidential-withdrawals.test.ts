/**
 * A confidential withdrawal whose submission is not confirmed is never
 * reported as failed while it may have landed: the row stays `submitting`,
 * no second request can be signed meanwhile, and the worker's pass submits
 * the same signed request again (the contract takes it once) or, past its
 * deadline, learns from the chain that it never landed.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { BaseError, createTestClient, http } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { startStack, type TestStack } from "../support/stack.js";
import { paymentRequest, signPayment, usdcBalance } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import {
  confidentialRequirements,
  withdrawTypedDataFromJson,
  pastNextMidnight,
} from "../chains/evm/confidential.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { utcDay } from "../../src/features/confidential/credits.js";
import { ConfidentialWithdrawals } from "../../src/features/confidential/withdrawals.js";
import { createLogger } from "../../src/lib/logger.js";
import type { ConfidentialVault } from "../../src/features/confidential/vaultPort.js";

describe("confidential withdrawals whose submission is not confirmed", () => {
  let stack: TestStack;
  let accountId: string;
  let slot: bigint;
  const wallet = privateKeyToAccount(generatePrivateKey());

  before(async () => {
    stack = await startStack({ confidential: true, confidentialWorker: false });
    const { confidential, db } = stack.service;
    const vault = confidential.vault!;
    accountId = (await createAccount(db, "merchant")).id;
    const apiKey = (await createApiKey(db, accountId, "k")).key;
    const message = confidential.merchants.enablementMessage(wallet.address, accountId);
    slot = (
      await confidential.merchants.enable(
        accountId,
        wallet.address,
        await wallet.signMessage({ message }),
      )
    ).slot!;
    const requirements = confidentialRequirements({
      usdc: stack.usdc,
      vault: vault.address,
      merchant: wallet.address,
      amount: "4000",
    });
    const payload = await signPayment(stack.payerKeys[0]!, requirements);
    const settled = (await (
      await post(stack.url, "/settle", paymentRequest(requirements, payload.payload), apiKey)
    ).json()) as { success: boolean };
    assert.equal(settled.success, true);
    // The day's batch, at a simulated midnight.
    const now = await pastNextMidnight(stack.rpcUrl, vault);
    assert.equal((await confidential.batch!.run(utcDay(now) - 1, now)).ran, true);
    assert.equal(await vault.balance(slot), 4000n);
  });
  after(async () => stack?.stop());

  /**
   * The withdrawals feature over the real vault, with the submission's answer
   * lost `times` times (`calls` counts the submissions).
   */
  function lossy(opts: {
    times: number;
    reachesChain: boolean;
    error?: Error;
    resubmitAfterMs?: number;
  }) {
    const vault = stack.service.confidential.vault!;
    const faulty: ConfidentialVault = Object.create(vault) as ConfidentialVault;
    let left = opts.times;
    const calls = { submissions: 0 };
    faulty.submitWithdraw = async (args) => {
      calls.submissions++;
      if (left <= 0) return vault.submitWithdraw(args);
      left--;
      if (opts.reachesChain) await vault.submitWithdraw(args);
      throw opts.error ?? new Error("the node's answer was lost");
    };
    const w = new ConfidentialWithdrawals(
      stack.service.db,
      faulty,
      stack.service.confidential.merchants,
      createLogger("silent"),
      // By default the test's pass is the worker's later one: no quiet time.
      { resubmitAfterMs: opts.resubmitAfterMs ?? 0 },
    );
    return Object.assign(w, { calls });
  }

  async function signed(w: ConfidentialWithdrawals, amount: string) {
    const typedData = (await w.typedData(accountId, amount)) as Record<string, unknown>;
    const signature = await wallet.signTypedData(withdrawTypedDataFromJson(typedData));
    return { typedData: typedData as never, signature };
  }

  const rows = () =>
    stack.service.db
      .selectFrom("confidential_withdrawals")
      .select(["state", "paid_amount", "onchain_id"])
      .where("account_id", "=", accountId)
      .orderBy("created_at")
      .execute();

  test("landed but unconfirmed: stays submitting, no second request meanwhile, then paid once", async () => {
    const w = lossy({ times: 1, reachesChain: true });
    const first = await signed(w, "1500");
    await assert.rejects(w.submit(accountId, first.typedData, first.signature), {
      code: "service_unavailable",
    });
    assert.deepEqual(await rows(), [{ state: "submitting", paid_amount: null, onchain_id: null }]);

    const second = await signed(w, "1000");
    await assert.rejects(w.submit(accountId, second.typedData, second.signature), {
      code: "conflict",
    });
    assert.equal((await rows()).length, 1, "the second request was not recorded");

    await w.finalizeOpen();
    const [row] = await rows();
    assert.equal(row!.state, "finalized");
    assert.equal(row!.paid_amount, "1500");
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, wallet.address), 1500n);
    assert.equal(await stack.service.confidential.vault!.balance(slot), 2500n, "debited once");
  });

  test("never reached the chain: retried until its deadline, then failed with nothing moved", async () => {
    const w = lossy({ times: 1_000, reachesChain: false });
    const vault = stack.service.confidential.vault!;
    const paidBefore = await usdcBalance(stack.rpcUrl, stack.usdc, wallet.address);
    const balanceBefore = await vault.balance(slot);
    const req = await signed(w, "500");
    await assert.rejects(w.submit(accountId, req.typedData, req.signature), {
      code: "service_unavailable",
    });
    await w.finalizeOpen();
    assert.equal((await rows()).at(-1)!.state, "submitting", "before its deadline it is retried");

    // Past the request's deadline (one hour), nothing can land any more.
    const deadline = BigInt((req.typedData as { message: { deadline: string } }).message.deadline);
    const testClient = createTestClient({ mode: "anvil", transport: http(stack.rpcUrl) });
    await testClient.setNextBlockTimestamp({ timestamp: deadline + 60n });
    await testClient.mine({ blocks: 1 });
    await w.finalizeOpen();
    const last = (await rows()).at(-1)!;
    assert.deepEqual(last, { state: "failed", paid_amount: null, onchain_id: null });
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, wallet.address), paidBefore);
    assert.equal(await vault.balance(slot), balanceBefore, "nothing debited");
  });

  test("a request signed before an earlier one landed is refused; the earlier one is paid once", async () => {
    const w = lossy({ times: 0, reachesChain: true });
    const vault = stack.service.confidential.vault!;
    const paidBefore = await usdcBalance(stack.rpcUrl, stack.usdc, wallet.address);
    const balanceBefore = await vault.balance(slot);
    const rowsBefore = (await rows()).length;
    // Both signed before either is submitted: they carry the same nonce.
    const first = await signed(w, "300");
    const stale = await signed(w, "200");
    const done = await w.submit(accountId, first.typedData, first.signature);
    assert.equal(done.state, "finalized");
    await assert.rejects(w.submit(accountId, stale.typedData, stale.signature), {
      code: "conflict",
      message: /nonce was used by another withdrawal/,
    });
    // The same signed request posted again is not a second payout either.
    await assert.rejects(w.submit(accountId, first.typedData, first.signature), {
      code: "conflict",
      message: /submitted already/,
    });
    const after = await rows();
    assert.equal(after.length, rowsBefore + 1, "one row: the request that landed");
    assert.deepEqual(after.at(-1), {
      state: "finalized",
      paid_amount: "300",
      onchain_id: after.at(-1)!.onchain_id,
    });
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, wallet.address), paidBefore + 300n);
    assert.equal(await vault.balance(slot), balanceBefore - 300n, "debited once");
  });

  test("a request just submitted is left to its own submission; its stored error names no URL or argument", async () => {
    const leaky = new BaseError("HTTP request failed.", {
      metaMessages: [
        "URL: https://base-rpc.example/v2/PROVIDER-KEY",
        "Request body: requestWithdraw(0xSLOTSECRET)",
      ],
    });
    const w = lossy({ times: 1, reachesChain: false, error: leaky, resubmitAfterMs: 60_000 });
    const req = await signed(w, "100");
    await assert.rejects(w.submit(accountId, req.typedData, req.signature), {
      code: "service_unavailable",
    });
    await w.finalizeOpen();
    assert.equal(w.calls.submissions, 1, "the worker's pass did not submit it a second time");
    const [stored] = await stack.service.db
      .selectFrom("confidential_withdrawals")
      .select(["state", "error"])
      .where("account_id", "=", accountId)
      .orderBy("created_at", "desc")
      .limit(1)
      .execute();
    assert.equal(stored!.state, "submitting");
    assert.equal(stored!.error, "HTTP request failed.");
    // Once left alone long enough, the pass submits it again and it is paid.
    const later = lossy({ times: 0, reachesChain: true });
    await later.finalizeOpen();
    assert.equal(later.calls.submissions, 1);
    assert.equal((await rows()).at(-1)!.state, "finalized");
  });
});
