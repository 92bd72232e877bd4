/**
 * The NEAR family as an operator meets it: the node down is the service's
 * 503, never the payer's fault, and nothing moves; a lost answer to a send
 * is followed, never failed; a relayed payment not final within the time
 * budget is `settlement_pending` with its hash, and a retry learns the
 * truth from the chain (one record, one transfer), including that a
 * transaction the node lost can no longer move money once its delegate
 * expired; a relayer nonce used elsewhere is re-read and the payment
 * re-wrapped, never paid twice.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { KeyPair, type KeyPairString } from "@near-js/crypto";
import { KeyPairSigner } from "@near-js/signers";
import { actionCreators, createTransaction } from "@near-js/transactions";
import { baseDecode } from "@near-js/utils";
import { startStack, type TestStack } from "../../support/stack.js";
import { startRpcProxy, type RpcProxy } from "../../support/rpcProxy.js";
import { post } from "../../support/payments.js";
import { until } from "../../support/processes.js";
import { nearPayment, nearRequirements, payerKey } from "../../support/nearPayments.js";

type Answer = { success: boolean; errorReason?: string; transaction: string };

describe("NEAR outages, lost answers and slow finality", () => {
  let stack: TestStack;
  let proxy: RpcProxy;

  before(async () => {
    stack = await startStack({
      near: true,
      nearBlockMs: 200,
      env: { SETTLE_TIMEOUT_MS: "1500" },
      nearRpcUrl: async (url) => {
        proxy = await startRpcProxy(url, '"send_tx"');
        return proxy.url;
      },
    });
  });
  after(async () => {
    await stack.stop();
    await proxy?.close();
  });

  const near = () => stack.near!;
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

  test("the node down: verify and settle answer 503, nothing moves, nothing is failed; back up, it settles", async () => {
    const payer = payerKey(near(), 0);
    const body = await nearPayment(near(), 0, nearRequirements(near(), { amount: "1111" }));
    const before = usdcOf(payer.accountId);
    proxy.state.down = true;
    try {
      const v = await post(stack.url, "/verify", body, stack.apiKey);
      assert.equal(v.status, 503, await v.clone().text());
      const s = await post(stack.url, "/settle", body, stack.apiKey);
      assert.equal(s.status, 503, await s.clone().text());
      assert.equal(typeof ((await s.json()) as { error: string }).error, "string");
    } finally {
      proxy.state.down = false;
    }
    assert.equal(usdcOf(payer.accountId), before);
    assert.deepEqual(
      (await rowsOf(payer.accountId, "1111")).filter((r) => r.status !== "not_attempted"),
      [],
    );
    const ok = await settle(body);
    assert.equal(ok.success, true, JSON.stringify(ok));
    assert.equal(usdcOf(payer.accountId), before - 1111n);
  });

  test("the answer to the send is lost: the transaction is followed by its hash and settles once", async () => {
    const payer = payerKey(near(), 1);
    const body = await nearPayment(near(), 1, nearRequirements(near(), { amount: "1212" }));
    const before = usdcOf(payer.accountId);
    proxy.state.drops = 1;
    const first = await settle(body);
    assert.equal(proxy.state.dropped, 1, "the send's answer was dropped");
    // Within the budget it is final (success); past it, pending: never a failure.
    assert.ok(first.success || first.errorReason === "settlement_pending", JSON.stringify(first));
    await until("the relayed transfer is final", async () =>
      usdcOf(payer.accountId) === before - 1212n ? true : undefined,
    );
    // One success answer for the payment: the first, or (if it could only
    // say pending) this re-presentation of it; the other is a replay.
    const again = await settle(body);
    assert.equal([first, again].filter((a) => a.success).length, 1, JSON.stringify([first, again]));
    if (first.success) {
      assert.deepEqual([again.errorReason, again.transaction], ["invalid_exact_near_nonce", ""]);
    }
    assert.equal(usdcOf(payer.accountId), before - 1212n);
    const rows = await rowsOf(payer.accountId, "1212");
    assert.deepEqual(
      rows.map((r) => r.status),
      ["succeeded"],
    );
  });

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
    const replaced = await stack.service.db
      .selectFrom("settlement_transactions")
      .select(["reference", "replaces"])
      .where("network", "=", "near:mainnet")
      .where("replaces", "is not", null)
      .execute();
    assert.ok(replaced.length >= 1, "a refused transaction was re-wrapped");
  });
});
