/**
 * NEAR's slow finality and relayer nonces, as an operator meets them: a
 * relayed payment not final within the time budget is `settlement_pending`
 * with its hash, and a retry learns the truth from the chain (one record,
 * one transfer), including that a transaction the node lost can no longer
 * move money once its delegate expired; a relayer nonce used elsewhere is
 * re-read and the payment re-wrapped, never paid twice. (The node down and
 * a lost answer to the send: test/families/outage.test.ts.)
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { KeyPair, type KeyPairString } from "@near-js/crypto";
import { KeyPairSigner } from "@near-js/signers";
import { actionCreators, createTransaction } from "@near-js/transactions";
import { baseDecode } from "@near-js/utils";
import { startStack, type TestStack } from "../../support/stack.js";
import { post } from "../../support/http.js";
import { until } from "../../support/processes.js";
import { nearPayment, nearRequirements, payerKey } from "./payments.js";

type Answer = { success: boolean; errorReason?: string; transaction: string };

describe("NEAR slow finality and relayer nonces", () => {
  let stack: TestStack;

  before(async () => {
    stack = await startStack({
      families: { near: { blockMs: 200 } },
      env: { SETTLE_TIMEOUT_MS: "1500" },
    });
  });
  after(async () => {
    await stack.stop();
  });

  const near = () => stack.families.near!;
  const usdcOf = (account: string) =>
    near().ledger.token(near().info.assets.USDC)!.balanceOf(account);
  const settle = async (body: unknown) =>
    (await (await post(stack.url, "/settle", body, stack.apiKey)).json()) as Answer;
  const rowsOf = (payer: string, amount: string) =>
    stack.service.db
      .selectFrom("settlements")
      .select(["status", "attempts", "transaction", "error_reason"])
      .where("payer", "=", payer)
      .where("amount", "=", amount)
      .execute();

  test("not final in time: settlement_pending with the hash; a retry once final answers success, one transfer", async () => {
    const payer = payerKey(near(), 2);
    const body = await nearPayment(near(), 2, nearRequirements(near(), { amount: "2222" }));
    const before = usdcOf(payer.accountId);
    near().ledger.withhold();
    let first: Answer;
    try {
      first = await settle(body);
    } finally {
      near().ledger.release();
    }
    assert.deepEqual([first.success, first.errorReason], [false, "settlement_pending"]);
    assert.match(first.transaction, /^[1-9A-HJ-NP-Za-km-z]{43,44}$/);
    assert.deepEqual(
      (await rowsOf(payer.accountId, "2222")).map((r) => r.status),
      ["pending"],
    );
    await until("the held transaction is final", async () =>
      near().ledger.stage(first.transaction) === "FINAL" ? true : undefined,
    );
    const retry = await settle(body);
    assert.deepEqual([retry.success, retry.transaction], [true, first.transaction]);
    assert.equal(usdcOf(payer.accountId), before - 2222n);
    assert.deepEqual(
      (await rowsOf(payer.accountId, "2222")).map((r) => [r.status, r.attempts, r.transaction]),
      [["succeeded", 2, first.transaction]],
    );
  });

  test("a pending transaction the node lost, past its delegate's expiry: failed as expired, nothing moved", async () => {
    const payer = payerKey(near(), 3);
    const req = nearRequirements(near(), { amount: "3333" });
    const body = await nearPayment(near(), 3, req, { ahead: 8n });
    const before = usdcOf(payer.accountId);
    near().ledger.withhold();
    const first = await settle(body);
    assert.deepEqual([first.success, first.errorReason], [false, "settlement_pending"]);
    // The node drops it from its pool, then the chain passes max_block_height.
    near().ledger.forget(first.transaction);
    near().ledger.release();
    const expiry = near().ledger.final.height + 12;
    await until("the chain is past the delegate's expiry", async () =>
      near().ledger.final.height > expiry ? true : undefined,
    );
    const retry = await settle(body);
    assert.deepEqual(
      [retry.success, retry.errorReason],
      [false, "invalid_exact_near_expired"],
      JSON.stringify(retry),
    );
    assert.equal(usdcOf(payer.accountId), before);
    assert.deepEqual(
      (await rowsOf(payer.accountId, "3333")).map((r) => [r.status, r.error_reason]),
      [["failed", "invalid_exact_near_expired"]],
    );
  });

  test("a relayer nonce used outside the service: re-read, the payment re-wrapped, paid once", async () => {
    const payer = payerKey(near(), 4);
    const before = usdcOf(payer.accountId);
    // Two settles so every relayer key has a nonce cached in the service.
    for (const amount of ["4001", "4002"]) {
      const out = await settle(await nearPayment(near(), 4, nearRequirements(near(), { amount })));
      assert.equal(out.success, true, JSON.stringify(out));
    }
    // An operator's script spends from both relayer keys meanwhile.
    for (const r of near().info.relayers) {
      const key = KeyPair.fromString(r.secretKey as KeyPairString);
      const ak = near().ledger.accessKey(r.accountId, key.getPublicKey().toString())!;
      const tx = createTransaction(
        r.accountId,
        key.getPublicKey(),
        near().info.payTo,
        ak.nonce + 5n,
        [actionCreators.transfer(1n)],
        baseDecode(near().ledger.head.hash),
      );
      const [, signed] = await new KeyPairSigner(key).signTransaction(tx);
      near().ledger.submit(Buffer.from(signed.encode()).toString("base64"));
    }
    near().ledger.produce();
    for (const amount of ["4003", "4004"]) {
      const out = await settle(await nearPayment(near(), 4, nearRequirements(near(), { amount })));
      assert.equal(out.success, true, JSON.stringify(out));
    }
    assert.equal(usdcOf(payer.accountId), before - 4001n - 4002n - 4003n - 4004n);
    // Re-wrapped for this payer's last two payments, not any earlier test's.
    const replaced = await stack.service.db
      .selectFrom("settlement_transactions as t")
      .innerJoin("settlements as s", "s.id", "t.settlement_id")
      .select(["t.reference", "t.replaces"])
      .where("t.network", "=", "near:mainnet")
      .where("t.replaces", "is not", null)
      .where("s.payer", "=", payer.accountId)
      .where("s.amount", "in", ["4003", "4004"])
      .execute();
    assert.ok(replaced.length >= 1, "a refused transaction was re-wrapped");
  });
});
