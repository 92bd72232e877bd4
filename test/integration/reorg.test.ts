/**
 * A success the chain takes back. anvil reorgs the block that held a
 * settlement answered `success: true` (its transaction is gone, the payer's
 * authorization unused again, the signer's nonce rolled back). The service
 * re-sends the journaled transaction, exactly as signed, and the transfer
 * is on the canonical chain again, once. When that transaction can no
 * longer be mined (another transaction took its nonce) but the payer's
 * authorization can still land, the same payment is sent again at a new
 * nonce and lands once: still succeeded, still charged, its row naming the
 * new transaction; when a stranger spent the authorization meanwhile (the
 * merchant is paid all the same), the row names the stranger's
 * transaction. Only when the payment cannot land at all is the
 * settlement recorded failed, with a `settlement.failed` event, and its
 * quota unit given back.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createPublicClient, createWalletClient, erc20Abi, http, parseAbi, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { setWebhookEndpoint } from "../../src/features/webhooks/webhookRepository.js";
import { dropSignedMaterial } from "../../src/features/settlements/settlementWrites.js";
import { requirementsFor, signPayment, usdcBalance } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { until } from "../support/processes.js";
import { decidedRow, eventsOf, quotaUsed, rowOfTransaction } from "../support/settlementRows.js";
import { startStack, type TestStack } from "../support/stack.js";

let stack: TestStack;
let chain: ReturnType<typeof createPublicClient>;

before(async () => {
  stack = await startStack({
    blockTimeSeconds: 0,
    facilitators: 1,
    env: { METER_SETTLEMENTS: "true" },
  });
  chain = createPublicClient({ transport: http(stack.rpcUrl) });
  await setWebhookEndpoint(stack.service.db, stack.accountId, "http://127.0.0.1:9/hook", {
    allowPrivateTargets: true,
  });
});
after(() => stack?.stop());

const anvil = async (method: string, params: unknown[]) => {
  const res = await fetch(stack.rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  const json = (await res.json()) as { result?: unknown; error?: { message: string } };
  if (json.error) throw new Error(json.error.message);
  return json.result;
};

/** Settles a payment of `amount` to `payTo` by payer `i`; its success's transaction and the body sent. */
async function settle(i: number, payTo: Hex, amount: bigint) {
  const requirements = requirementsFor({
    network: "eip155:8453",
    usdc: stack.usdc,
    payTo,
    amount: amount.toString(),
  });
  const body = {
    x402Version: 2,
    paymentPayload: await signPayment(stack.payerKeys[i]!, requirements),
    paymentRequirements: requirements,
  };
  const res = await post(stack.url, "/settle", body, stack.apiKey);
  const answer = (await res.json()) as { success: boolean; transaction: Hex };
  assert.equal(answer.success, true, JSON.stringify(answer));
  return { transaction: answer.transaction, body };
}

/** Settles a payment of `amount` to `payTo` by payer `i`; its success's transaction. */
async function settled(i: number, payTo: Hex, amount: bigint) {
  return (await settle(i, payTo, amount)).transaction;
}

/** A reorg of the last block, and at once a transaction of our signer at the nonce it freed. */
async function reorgAndTakeTheNonce() {
  const signerKey = stack.devnet.networks["eip155:8453"]!.facilitatorPrivateKeys[0] as Hex;
  const signer = privateKeyToAccount(signerKey);
  await anvil("anvil_reorg", [1, []]);
  const nonce = await chain.getTransactionCount({ address: signer.address });
  await createWalletClient({ account: signer, transport: http(stack.rpcUrl) }).sendTransaction({
    to: signer.address,
    value: 0n,
    nonce,
    chain: null,
  });
  return signer.address;
}

test("a reorg takes a settled transaction out: it is re-sent from the journal and the transfer is on the chain again, once", async () => {
  const payTo = "0x00000000000000000000000000000000000e0e01" as Hex;
  const tx = await settled(0, payTo, 4_321n);
  assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payTo), 4_321n);

  await anvil("anvil_reorg", [1, []]);
  assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payTo), 0n, "the reorg took it out");

  const receipt = await until("the transaction mined again", () =>
    chain.getTransactionReceipt({ hash: tx }),
  );
  assert.equal(receipt.status, "success");
  assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payTo), 4_321n, "paid once");
  const row = await rowOfTransaction(stack, tx);
  assert.equal(row.status, "succeeded");
});

test("the reorg watch asks EVM successes together: a success still mined is confirmed by its receipt, an unknown transaction is left to be asked alone", async () => {
  const payTo = "0x00000000000000000000000000000000000e0e05" as Hex;
  const tx = await settled(0, payTo, 1_234n);
  const unknown = `0x${"ab".repeat(32)}`;
  const asked = () => stack.service.facilitator.stillLanded("eip155:8453", [unknown, tx]);
  assert.deepEqual([...(await asked())], [tx], "only the mined success");
  assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payTo), 1_234n, "paid once");
});

test("a reorged transaction whose nonce another transaction took, and whose payment can no longer land (the payer moved its funds), is recorded failed, with settlement.failed, and unbilled", async () => {
  const payTo = "0x00000000000000000000000000000000000e0e02" as Hex;
  const tx = await settled(1, payTo, 5_432n);
  const before = await rowOfTransaction(stack, tx);
  const used = await stack.service.db
    .selectFrom("quota_usage")
    .select("used")
    .where("account_id", "=", stack.accountId)
    .executeTakeFirstOrThrow();

  // The reorg, and at once a transaction of the same signer at the same
  // nonce from outside the service: the journaled one can no longer be
  // mined. And the payer spends its funds elsewhere: sent again, the
  // payment cannot land either.
  await reorgAndTakeTheNonce();
  const payer = privateKeyToAccount(stack.payerKeys[1]!);
  const funds = await usdcBalance(stack.rpcUrl, stack.usdc, payer.address);
  const moved = await createWalletClient({
    account: payer,
    transport: http(stack.rpcUrl),
  }).writeContract({
    address: stack.usdc,
    abi: erc20Abi,
    functionName: "transfer",
    args: ["0x00000000000000000000000000000000000e0e0f", funds],
    chain: null,
  });
  assert.equal((await chain.waitForTransactionReceipt({ hash: moved })).status, "success");

  const failed = await until(
    "the settlement recorded failed",
    async () => {
      const row = await rowOfTransaction(stack, tx);
      return row.status === "failed" ? row : undefined;
    },
    60_000,
  );
  assert.equal(before.status, "succeeded");
  assert.match(failed.error_message ?? "", /superseded|nothing was transferred/);
  assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payTo), 0n, "nothing moved");
  const events = await stack.service.db
    .selectFrom("webhook_events")
    .select("type")
    .where("settlement_id", "=", failed.id)
    .orderBy("seq")
    .execute();
  assert.deepEqual(
    events.map((e) => e.type),
    ["settlement.succeeded", "settlement.failed"],
  );
  const after = await stack.service.db
    .selectFrom("quota_usage")
    .select("used")
    .where("account_id", "=", stack.accountId)
    .executeTakeFirstOrThrow();
  assert.equal(after.used, used.used - 1, "its quota unit is given back");
});

test("a reorged transaction whose nonce another transaction took, while its authorization is still good, lands again: the same payment, once, still succeeded and charged", async () => {
  const payTo = "0x00000000000000000000000000000000000e0e04" as Hex;
  const { transaction: tx, body } = await settle(2, payTo, 6_543n);
  const { id } = await rowOfTransaction(stack, tx);
  const used = await quotaUsed(stack);

  const signer = await reorgAndTakeTheNonce();
  assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payTo), 0n, "the reorg took it out");

  const row = await decidedRow(stack, id, tx);
  assert.equal(row.status, "succeeded", `${row.error_reason}: ${row.error_message}`);
  const again = row.transaction as Hex;
  assert.notEqual(again, tx);
  const receipt = await until("the payment mined again", () =>
    chain.getTransactionReceipt({ hash: again }),
  );
  assert.equal(receipt.status, "success");
  assert.equal(receipt.from.toLowerCase(), signer.toLowerCase(), "sent by the same account");
  await assert.rejects(chain.getTransactionReceipt({ hash: tx }), "the first is not on the chain");
  assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payTo), 6_543n, "paid once");

  const journal = await stack.service.db
    .selectFrom("settlement_transactions")
    .select("reference")
    .where("settlement_id", "=", id)
    .orderBy("created_at")
    .execute();
  assert.deepEqual(
    journal.map((j) => j.reference),
    [tx, again],
    "both journaled against the settlement",
  );
  assert.deepEqual(await eventsOf(stack, id), ["settlement.succeeded"], "no settlement.failed");
  assert.equal(await quotaUsed(stack), used, "still charged, once");

  // The payment presented again is not settled a second time.
  const res = await post(stack.url, "/settle", body, stack.apiKey);
  const answer = (await res.json()) as { success: boolean };
  assert.equal(answer.success, false, JSON.stringify(answer));
  assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payTo), 6_543n, "still paid once");
});

test("a reorged transaction whose nonce another transaction took, and whose authorization a stranger then spent, is still the success: the row names the stranger's transaction, no settlement.failed, still charged", async () => {
  const payTo = "0x00000000000000000000000000000000000e0e06" as Hex;
  const { transaction: tx, body } = await settle(4, payTo, 7_654n);
  const { id } = await rowOfTransaction(stack, tx);
  const used = await quotaUsed(stack);

  await reorgAndTakeTheNonce();
  assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payTo), 0n, "the reorg took it out");
  // Anyone may submit the payer's signed authorization; the signature fixes
  // the recipient and the amount, so the merchant is paid all the same.
  const { authorization, signature } = body.paymentPayload.payload as {
    authorization: {
      from: Hex;
      to: Hex;
      value: string;
      validAfter: string;
      validBefore: string;
      nonce: Hex;
    };
    signature: Hex;
  };
  const stranger = privateKeyToAccount(stack.payerKeys[3]!);
  const spent = await createWalletClient({
    account: stranger,
    transport: http(stack.rpcUrl),
  }).writeContract({
    address: stack.usdc,
    abi: parseAbi([
      "function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)",
    ]),
    functionName: "transferWithAuthorization",
    args: [
      authorization.from,
      authorization.to,
      BigInt(authorization.value),
      BigInt(authorization.validAfter),
      BigInt(authorization.validBefore),
      authorization.nonce,
      signature,
    ],
    chain: null,
  });
  assert.equal((await chain.waitForTransactionReceipt({ hash: spent })).status, "success");

  const row = await decidedRow(stack, id, tx);
  assert.deepEqual(
    [row.status, row.transaction],
    ["succeeded", spent],
    `${row.error_reason}: ${row.error_message}`,
  );
  assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payTo), 7_654n, "paid once");
  assert.deepEqual(await eventsOf(stack, id), ["settlement.succeeded"], "no settlement.failed");
  assert.equal(await quotaUsed(stack), used, "still charged, once");
});

test("a success's signed bytes stay in the journal while a reorg can take it back, and are dropped once its watch is over", async () => {
  const payTo = "0x00000000000000000000000000000000000e0e03" as Hex;
  const tx = await settled(0, payTo, 1_234n);
  const journal = () =>
    stack.service.db
      .selectFrom("settlement_transactions")
      .select(["status", "detail"])
      .where("reference", "=", tx)
      .executeTakeFirstOrThrow();
  const mined = await until("the journal entry marked mined", async () => {
    const entry = await journal();
    return entry.status === "success" && entry;
  });
  assert.equal("raw" in mined.detail, true, "kept for a re-send after a reorg");

  // A sweep whose cutoff is before this success leaves it; one after drops it.
  await dropSignedMaterial(stack.service.db, new Date(Date.now() - 60_000));
  assert.equal("raw" in (await journal()).detail, true);
  await dropSignedMaterial(stack.service.db, new Date(Date.now() + 1_000));
  const after = await journal();
  assert.equal("raw" in after.detail, false, JSON.stringify(after.detail));
  assert.equal(after.status, "success");
});
