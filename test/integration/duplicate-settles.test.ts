/**
 * One authorization, one transaction, one record, one success answer, and
 * answers that tell the truth about it:
 * - a retry after `settlement_pending` learns the outcome from the chain:
 *   pending again while unmined, success with the mined transaction once it
 *   is (once), billed once, one record, no `settlement.failed` event; any
 *   later copy is refused as a replay;
 * - a retry whose authorization was consumed by an unrelated transaction is
 *   a failure;
 * - concurrent duplicates send one transaction; one of them is answered
 *   success, the others `duplicate_settlement` with no transaction;
 * - a replay after success, and another authorization reusing the settled
 *   nonce (another amount, another deadline), are refused with the nonce
 *   reason and sent nowhere; `/verify` says so without the chain;
 * - the same payment through another account is not answered as paid.
 *
 * The chain is held still (anvil's automine off) so "not mined yet" is a
 * fact the test controls, not a race.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createPublicClient, createWalletClient, http, parseAbi, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { PaymentPayload } from "@x402/core/types";
import { startStack, type TestStack } from "../support/stack.js";
import { requirementsFor, signPayment, usdcBalance } from "../chains/evm/payments.js";
import { onlyOneSuccess, post } from "../support/http.js";
import { signAuthorization } from "../chains/evm/authorization.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { setWebhookEndpoint } from "../../src/features/webhooks/webhookRepository.js";

const PAY_TO = "0x7171717171717171717171717171717171717171" as Hex;

interface Settle {
  success: boolean;
  transaction: string;
  errorReason?: string;
  network: string;
}

describe("duplicates and retries of one authorization", () => {
  let stack: TestStack;
  let rpc: ReturnType<typeof createPublicClient>;

  before(async () => {
    stack = await startStack({
      payers: 8,
      facilitators: 2,
      env: { SETTLE_TIMEOUT_MS: "1000", METER_SETTLEMENTS: "true", RECONCILE_AFTER_MS: "600000" },
    });
    rpc = createPublicClient({ transport: http(stack.rpcUrl) });
    // Webhook endpoint so events are written to the outbox (delivery may fail; rows are what count).
    await setWebhookEndpoint(stack.service.db, stack.accountId, "http://127.0.0.1:9/hook", {
      allowPrivateTargets: true,
    });
  });
  after(async () => {
    await rpc.request({ method: "evm_setAutomine" as never, params: [true] as never });
    await stack.stop();
  });

  const automine = (on: boolean) =>
    rpc.request({ method: "evm_setAutomine" as never, params: [on] as never });
  const mine = () => rpc.request({ method: "evm_mine" as never, params: [] as never });
  const body = async (payerIndex: number, amount = "1000") => {
    const requirements = requirementsFor({
      network: stack.network,
      usdc: stack.usdc,
      payTo: PAY_TO,
      amount,
    });
    return {
      x402Version: 2,
      paymentPayload: await signPayment(stack.payerKeys[payerIndex]!, requirements),
      paymentRequirements: requirements,
    };
  };
  const settle = async (b: unknown, apiKey = stack.apiKey) =>
    (await (await post(stack.url, "/settle", b, apiKey)).json()) as Settle;
  const rowsOf = (payer: Hex) =>
    stack.service.db
      .selectFrom("settlements")
      .selectAll()
      .where("payer", "=", payer.toLowerCase())
      .execute();
  const eventsOf = (settlementId: string) =>
    stack.service.db
      .selectFrom("webhook_events")
      .select("type")
      .where("settlement_id", "=", settlementId)
      .execute();
  const used = async () =>
    (
      await stack.service.db
        .selectFrom("quota_usage")
        .select("used")
        .where("account_id", "=", stack.accountId)
        .executeTakeFirst()
    )?.used ?? 0;
  const signerNonces = async () => {
    let total = 0;
    for (const key of stack.devnet.networks[stack.network]!.facilitatorPrivateKeys) {
      total += await rpc.getTransactionCount({
        address: privateKeyToAccount(key as Hex).address,
        blockTag: "pending",
      });
    }
    return total;
  };

  test("a retry after settlement_pending answers pending while unmined, then the mined success at once, billed once", async () => {
    const b = await body(0);
    const payer = privateKeyToAccount(stack.payerKeys[0]!).address;
    const usedBefore = await used();
    const paidBefore = await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO);
    await automine(false);
    let first: Settle;
    try {
      first = await settle(b);
      assert.equal(first.errorReason, "settlement_pending", JSON.stringify(first));
      assert.match(first.transaction, /^0x[0-9a-f]{64}$/);

      const stillOpen = await settle(b);
      assert.equal(stillOpen.errorReason, "settlement_pending", "unmined: pending again");
      assert.equal(stillOpen.transaction, first.transaction);
      await mine();
    } finally {
      await automine(true);
    }
    const retry = await settle(b);
    assert.equal(retry.success, true, JSON.stringify(retry));
    assert.equal(retry.transaction, first.transaction);

    const again = await settle(b);
    assert.deepEqual(
      [again.success, again.errorReason, again.transaction],
      [false, "invalid_exact_evm_nonce_already_used", ""],
      "the one success was answered: a later copy is a replay",
    );

    const rows = await rowsOf(payer);
    assert.equal(rows.length, 1, "retries fold into one record");
    assert.deepEqual(
      [rows[0]!.status, rows[0]!.transaction, rows[0]!.attempts, rows[0]!.billed],
      ["succeeded", first.transaction, 4, true],
    );
    assert.deepEqual(
      (await eventsOf(rows[0]!.id)).map((e) => e.type),
      ["settlement.succeeded"],
      "no settlement.failed for a payment that landed",
    );
    assert.equal(await used(), usedBefore + 1, "billed exactly once");
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO), paidBefore + 1000n);
  });

  test("a retry whose authorization was consumed by an unrelated transaction is a failure", async () => {
    const b = await body(1);
    const payer = privateKeyToAccount(stack.payerKeys[1]!).address;
    await automine(false);
    try {
      const first = await settle(b);
      assert.equal(first.errorReason, "settlement_pending");
      // Our transaction leaves the pool; someone else spends the authorization.
      const ours = await rpc.getTransaction({ hash: first.transaction as Hex });
      await rpc.request({
        method: "anvil_dropTransaction" as never,
        params: [first.transaction] as never,
      });
      // Keep the signer's nonces gap-free, as a replacement would on a real chain.
      const signerKey = stack.devnet.networks[stack.network]!.facilitatorPrivateKeys.find(
        (k) => privateKeyToAccount(k as Hex).address.toLowerCase() === ours.from.toLowerCase(),
      ) as Hex;
      await createWalletClient({
        account: privateKeyToAccount(signerKey),
        transport: http(stack.rpcUrl),
      }).sendTransaction({
        chain: null,
        to: ours.from,
        value: 0n,
        nonce: ours.nonce,
        gas: 21_000n,
      });
      const auth = (b.paymentPayload as PaymentPayload).payload as {
        authorization: Record<string, string>;
        signature: Hex;
      };
      const other = createWalletClient({
        account: privateKeyToAccount(stack.payerKeys[7]!),
        transport: http(stack.rpcUrl),
      });
      await other.writeContract({
        chain: null,
        address: stack.usdc,
        abi: parseAbi([
          "function transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)",
        ]),
        functionName: "transferWithAuthorization",
        args: [
          auth.authorization["from"] as Hex,
          auth.authorization["to"] as Hex,
          BigInt(auth.authorization["value"]!),
          BigInt(auth.authorization["validAfter"]!),
          BigInt(auth.authorization["validBefore"]!),
          auth.authorization["nonce"] as Hex,
          auth.signature,
        ],
      });
      await mine();
    } finally {
      await automine(true);
    }
    const retry = await settle(b);
    assert.equal(retry.success, false);
    assert.equal(retry.errorReason, "settlement_interrupted", JSON.stringify(retry));
    const rows = await rowsOf(payer);
    assert.deepEqual(
      rows.map((r) => [r.status, r.error_reason, r.billed]),
      [["failed", "settlement_interrupted", false]],
    );
  });

  test("30 concurrent duplicates send one transaction; one answer is the success, 29 are duplicate_settlement", async () => {
    const b = await body(2);
    const payer = privateKeyToAccount(stack.payerKeys[2]!).address;
    const noncesBefore = await signerNonces();
    const paidBefore = await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO);
    const usedBefore = await used();
    const answers = await Promise.all(Array.from({ length: 30 }, () => settle(b)));
    const success = onlyOneSuccess(answers, [
      "duplicate_settlement",
      "invalid_exact_evm_nonce_already_used",
    ]);
    assert.match(success.transaction, /^0x[0-9a-f]{64}$/);
    assert.equal(await used(), usedBefore + 1, "one unit of quota");
    assert.equal(
      await signerNonces(),
      noncesBefore + 1,
      "the signers' nonces moved by exactly one",
    );
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO), paidBefore + 1000n);
    const rows = await rowsOf(payer);
    assert.deepEqual(
      rows.map((r) => [r.status, r.attempts, r.transaction]),
      [["succeeded", 30, success.transaction]],
    );
    assert.ok(rows[0]!.success_answered_at, "the one success answer is recorded");
  });

  test("a replay after success, and other authorizations reusing the settled nonce, are refused and send nothing; /verify says so", async () => {
    const requirements = requirementsFor({
      network: stack.network,
      usdc: stack.usdc,
      payTo: PAY_TO,
      amount: "1000",
    });
    const validBefore = BigInt(Math.floor(Date.now() / 1000) + 600);
    const signed = (value: bigint, before: bigint, nonce?: Hex) =>
      signAuthorization(stack.payerKeys[4]!, requirements, {
        to: PAY_TO,
        value,
        validAfter: 0n,
        validBefore: before,
        ...(nonce ? { nonce } : {}),
      });
    const request = (paymentPayload: PaymentPayload, amount = "1000") => ({
      x402Version: 2,
      paymentPayload,
      paymentRequirements: { ...requirements, amount },
    });
    const first = request(await signed(1000n, validBefore));
    const nonce = (first.paymentPayload.payload as { authorization: { nonce: Hex } }).authorization
      .nonce;
    const paid = await settle(first);
    assert.equal(paid.success, true, JSON.stringify(paid));

    const noncesBefore = await signerNonces();
    const paidBefore = await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO);
    const replay = await settle(first);
    const otherDeadline = await settle(request(await signed(1000n, validBefore + 60n, nonce)));
    const otherAmount = await settle(request(await signed(5_000n, validBefore, nonce), "5000"));
    for (const answer of [replay, otherDeadline, otherAmount]) {
      assert.deepEqual(
        [answer.success, answer.errorReason, answer.transaction],
        [false, "invalid_exact_evm_nonce_already_used", ""],
        JSON.stringify(answer),
      );
    }
    assert.equal(await signerNonces(), noncesBefore, "nothing was sent");
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO), paidBefore);

    const verify = async (b: unknown) =>
      (await (await post(stack.url, "/verify", b, stack.apiKey)).json()) as {
        isValid: boolean;
        invalidReason?: string;
      };
    assert.deepEqual(await verify(first), {
      isValid: false,
      invalidReason: "duplicate_settlement",
      invalidMessage:
        "this payment was already settled and answered as paid; a copy of it is not paid again",
      payer: privateKeyToAccount(stack.payerKeys[4]!).address,
    });
    const reused = await verify(request(await signed(1000n, validBefore + 120n, nonce)));
    assert.equal(reused.isValid, false);
    assert.equal(reused.invalidReason, "invalid_exact_evm_nonce_already_used");
  });

  test("while a payment is settling, another authorization reusing its nonce is refused, not answered with the first one's outcome", async () => {
    const requirements = requirementsFor({
      network: stack.network,
      usdc: stack.usdc,
      payTo: PAY_TO,
      amount: "10000",
    });
    const validBefore = BigInt(Math.floor(Date.now() / 1000) + 600);
    const cheap = await signAuthorization(stack.payerKeys[5]!, requirements, {
      to: PAY_TO,
      value: 10_000n,
      validAfter: 0n,
      validBefore,
    });
    const nonce = (cheap.payload as { authorization: { nonce: Hex } }).authorization.nonce;
    const dear = await signAuthorization(
      stack.payerKeys[5]!,
      { ...requirements, amount: "5000000" },
      { to: PAY_TO, value: 5_000_000n, validAfter: 0n, validBefore, nonce },
    );
    await automine(false);
    let dearAnswer: Settle;
    try {
      const first = await settle({
        x402Version: 2,
        paymentPayload: cheap,
        paymentRequirements: requirements,
      });
      assert.equal(first.errorReason, "settlement_pending", JSON.stringify(first));
      dearAnswer = await settle({
        x402Version: 2,
        paymentPayload: dear,
        paymentRequirements: { ...requirements, amount: "5000000" },
      });
      await mine();
    } finally {
      await automine(true);
    }
    assert.deepEqual(
      [dearAnswer.success, dearAnswer.errorReason, dearAnswer.transaction],
      [false, "invalid_exact_evm_nonce_already_used", ""],
    );
  });

  test("the same payment through another account is settled once, for the first account only", async () => {
    const b = await body(3);
    const account = await createAccount(stack.service.db, "second");
    const otherKey = (await createApiKey(stack.service.db, account.id, "second")).key;
    const mineFirst = await settle(b);
    assert.equal(mineFirst.success, true, JSON.stringify(mineFirst));
    const theirs = await settle(b, otherKey);
    assert.equal(theirs.success, false);
    assert.equal(theirs.errorReason, "duplicate_settlement");
    assert.equal(theirs.transaction, "");
    const theirVerify = (await (await post(stack.url, "/verify", b, otherKey)).json()) as {
      isValid: boolean;
      invalidReason?: string;
    };
    assert.deepEqual(
      [theirVerify.isValid, theirVerify.invalidReason],
      [false, "duplicate_settlement"],
    );
    const theirRows = await stack.service.db
      .selectFrom("settlements")
      .select("id")
      .where("account_id", "=", account.id)
      .execute();
    assert.equal(theirRows.length, 0, "nothing recorded or billed for the second account");
  });
});
