/**
 * The reorg watch takes a success back only on the chain's positive word.
 * Reads that fail are no verdict: a Permit2 success whose receipt the RPC
 * will not serve stays a success and is asked again. A Permit2 success a
 * reorg took out, whose permit a stranger then submitted through the proxy
 * (anyone may: the signature fixes the recipient and the amount), is still
 * the success, in the stranger's transaction. And a success re-sent at a new
 * nonce is followed until that transaction is mined and past its own watch,
 * however long after the success's window: a reorg that takes the re-sent
 * transaction out as well is seen, and the transaction lands again.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import {
  createPublicClient,
  createWalletClient,
  encodeFunctionData,
  erc20Abi,
  http,
  maxUint256,
  type Hex,
  type PublicClient,
} from "viem";
import { privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { PERMIT2_ADDRESS, x402ExactPermit2ProxyABI, x402ExactPermit2ProxyAddress } from "@x402/evm";
import type { PaymentRequirements } from "@x402/core/types";
import { setWebhookEndpoint } from "../../src/features/webhooks/webhookRepository.js";
import { requirementsFor, signPayment, usdcBalance } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { until } from "../support/processes.js";
import {
  decidedRow,
  eventsOf,
  quotaUsed,
  rowById,
  rowOfTransaction,
} from "../support/settlementRows.js";
import { startRpcProxy, type RpcProxy } from "../support/rpcProxy.js";
import { startStack, type TestStack } from "../support/stack.js";

const NETWORK = "eip155:8453";
/** The reorg watch's window here: short, so a success leaves it within the test. */
const WINDOW_MS = 6_000;

let stack: TestStack;
let proxy: RpcProxy;
let chain: PublicClient;

before(async () => {
  stack = await startStack({
    blockTimeSeconds: 0,
    facilitators: 1,
    env: { METER_SETTLEMENTS: "true" },
    baseRpcUrl: async (nodeUrl) => (proxy = await startRpcProxy(nodeUrl)).url,
    successWatch: { windowMs: WINDOW_MS, intervalMs: 200 },
  });
  chain = createPublicClient({ transport: http(stack.rpcUrl) });
  // An endpoint, so each settlement's events are recorded.
  await setWebhookEndpoint(stack.service.db, stack.accountId, "http://127.0.0.1:9/hook", {
    allowPrivateTargets: true,
  });
});
after(async () => {
  await stack?.stop();
  await proxy?.close();
});

/** A call to the node itself (not through the service's proxy). */
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

/** `account`'s transaction, signed here, to go into a block anvil builds (a reorg's). */
async function signed(account: PrivateKeyAccount, call: { to: Hex; data?: Hex; nonce?: number }) {
  const block = await chain.getBlock();
  return account.signTransaction({
    chainId: await chain.getChainId(),
    type: "eip1559",
    to: call.to,
    ...(call.data ? { data: call.data } : {}),
    value: 0n,
    gas: 300_000n,
    nonce: call.nonce ?? (await chain.getTransactionCount({ address: account.address })),
    maxFeePerGas: (block.baseFeePerGas ?? 1_000_000_000n) * 3n + 1_000_000_000n,
    maxPriorityFeePerGas: 1_000_000_000n,
  });
}

const facilitator = () =>
  privateKeyToAccount(stack.devnet.networks[NETWORK]!.facilitatorPrivateKeys[0] as Hex);

/**
 * Takes the last block back and mines in its place one transaction of our
 * signer at the nonce the settlement's transaction had (so that one can no
 * longer be mined), and `more` after it, in one step: nothing of the service
 * runs between the reorg and those transactions.
 */
async function reorgAndTakeTheNonce(tx: Hex, more: Hex[] = []) {
  const { nonce } = await chain.getTransaction({ hash: tx });
  const taker = await signed(facilitator(), { to: facilitator().address, nonce });
  await anvil("anvil_reorg", [1, [taker, ...more].map((raw) => [raw, 0])]);
}

async function approvePermit2(i: number) {
  const payer = privateKeyToAccount(stack.payerKeys[i]!);
  const hash = await createWalletClient({
    account: payer,
    transport: http(stack.rpcUrl),
  }).writeContract({
    address: stack.usdc,
    abi: erc20Abi,
    functionName: "approve",
    args: [PERMIT2_ADDRESS, maxUint256],
    chain: null,
  });
  assert.equal((await chain.waitForTransactionReceipt({ hash })).status, "success");
}

/** Settles `amount` to `payTo` by payer `i`, through Permit2 when `permit2`; the success and its row. */
async function settle(i: number, payTo: Hex, amount: bigint, permit2: boolean) {
  const base = requirementsFor({ network: NETWORK, usdc: stack.usdc, payTo, amount: `${amount}` });
  const requirements: PaymentRequirements = permit2
    ? { ...base, extra: { ...base.extra, assetTransferMethod: "permit2" } }
    : base;
  if (permit2) await approvePermit2(i);
  const body = {
    x402Version: 2,
    paymentPayload: await signPayment(stack.payerKeys[i]!, requirements),
    paymentRequirements: requirements,
  };
  const res = await post(stack.url, "/settle", body, stack.apiKey);
  const answer = (await res.json()) as { success: boolean; transaction: Hex };
  assert.equal(answer.success, true, JSON.stringify(answer));
  const row = await rowOfTransaction(stack, answer.transaction);
  return { transaction: answer.transaction, body, row };
}

test("a Permit2 success whose receipt the RPC will not serve is never taken back: it stays succeeded, charged, and is asked again once reads work", async () => {
  const payTo = "0x00000000000000000000000000000000000e1e01" as Hex;
  const { transaction: tx, row } = await settle(0, payTo, 2_345n, true);
  const used = await quotaUsed(stack);

  // Every receipt read fails from now on (a provider that errors, a
  // lagging backend behind the fallback): many passes of the watch.
  const asked = () =>
    proxy.state.refused.filter((b) => b.toLowerCase().includes(tx.toLowerCase())).length;
  proxy.state.refused = [];
  proxy.state.refuseMatching = "eth_getTransactionReceipt";
  try {
    await until(
      "several passes of the watch, or the success taken back",
      async () => asked() >= 8 || (await rowById(stack, row.id)).status !== "succeeded",
      30_000,
    );
    // And on past the success's window: it is still to be asked.
    await until("the success past the window", async () =>
      Date.now() - row.finished_at!.getTime() > WINDOW_MS * 1.5 ? true : undefined,
    );
  } finally {
    proxy.state.refuseMatching = "";
  }
  const during = await rowById(stack, row.id);
  assert.deepEqual(
    [during.status, during.transaction],
    ["succeeded", tx],
    during.error_message ?? "",
  );

  // Reads work again: the success is asked again (past its window), and stays.
  proxy.state.answers = [];
  proxy.state.dropMatching = tx;
  try {
    await until("the success asked again", async () =>
      proxy.state.answers.some((a) => a.includes('"status":"0x1"')),
    );
  } finally {
    proxy.state.dropMatching = "";
  }
  const afterwards = await rowById(stack, row.id);
  assert.deepEqual([afterwards.status, afterwards.transaction], ["succeeded", tx]);
  assert.deepEqual(await eventsOf(stack, row.id), ["settlement.succeeded"], "no settlement.failed");
  assert.equal(await quotaUsed(stack), used, "still charged");
  assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payTo), 2_345n);
});

test("a reorged Permit2 success whose permit a stranger submitted through the proxy is still the success: the row names the stranger's transaction, no settlement.failed, still charged, paid once", async () => {
  const payTo = "0x00000000000000000000000000000000000e1e02" as Hex;
  const { transaction: tx, body, row } = await settle(1, payTo, 3_456n, true);
  const used = await quotaUsed(stack);

  const { permit2Authorization: auth, signature } = body.paymentPayload.payload as {
    permit2Authorization: {
      from: Hex;
      permitted: { token: Hex; amount: string };
      nonce: string;
      deadline: string;
      witness: { to: Hex; validAfter: string };
    };
    signature: Hex;
  };
  const stranger = privateKeyToAccount(stack.payerKeys[3]!);
  const submitted = await signed(stranger, {
    to: x402ExactPermit2ProxyAddress,
    data: encodeFunctionData({
      abi: x402ExactPermit2ProxyABI,
      functionName: "settle",
      args: [
        {
          permitted: { token: auth.permitted.token, amount: BigInt(auth.permitted.amount) },
          nonce: BigInt(auth.nonce),
          deadline: BigInt(auth.deadline),
        },
        auth.from,
        { to: auth.witness.to, validAfter: BigInt(auth.witness.validAfter) },
        signature,
      ],
    }),
  });
  // The reorg takes our transaction out, another transaction of our signer
  // takes its nonce, and the stranger's submission of the same permit lands.
  await reorgAndTakeTheNonce(tx, [submitted]);
  const theirs = await chain.getTransactionReceipt({
    hash: (await chain.getBlock({ includeTransactions: true })).transactions.at(-1)!.hash,
  });
  assert.equal(theirs.from.toLowerCase(), stranger.address.toLowerCase());
  assert.equal(theirs.status, "success");
  await assert.rejects(chain.getTransactionReceipt({ hash: tx }), "ours is not on the chain");

  const outcome = await decidedRow(stack, row.id, tx);
  assert.deepEqual(
    [outcome.status, outcome.transaction],
    ["succeeded", theirs.transactionHash],
    `${outcome.error_reason}: ${outcome.error_message}`,
  );
  assert.deepEqual(await eventsOf(stack, row.id), ["settlement.succeeded"], "no settlement.failed");
  assert.equal(await quotaUsed(stack), used, "still charged, once");
  assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payTo), 3_456n, "paid once");
});

test("a success re-sent at a new nonce, unmined when the success leaves the window, is followed until mined and past its own watch: a reorg of the re-sent transaction is seen and it lands again", async () => {
  const payTo = "0x00000000000000000000000000000000000e1e03" as Hex;
  const { transaction: tx, row } = await settle(2, payTo, 4_567n, false);
  const used = await quotaUsed(stack);

  // Nothing is mined until the test says so; the reorg takes our
  // transaction out and another of our signer takes its nonce.
  await anvil("evm_setAutomine", [false]);
  try {
    await reorgAndTakeTheNonce(tx);
    const resent = await until("the payment sent again at a new nonce", async () => {
      const journal = await stack.service.db
        .selectFrom("settlement_transactions")
        .select("reference")
        .where("settlement_id", "=", row.id)
        .where("reference", "<>", tx)
        .execute();
      return journal.length > 0 && journal;
    });
    assert.ok(resent.length >= 1);
    // The success leaves the window with its re-sent transaction unmined.
    await until("the success past the window", async () =>
      Date.now() - row.finished_at!.getTime() > WINDOW_MS * 1.5 ? true : undefined,
    );
    await anvil("evm_mine", []);
  } finally {
    await anvil("evm_setAutomine", [true]);
  }
  const moved = await decidedRow(stack, row.id, tx);
  assert.equal(moved.status, "succeeded", `${moved.error_reason}: ${moved.error_message}`);
  const again = moved.transaction as Hex;
  assert.equal((await chain.getTransactionReceipt({ hash: again })).status, "success");
  assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payTo), 4_567n);

  // A reorg takes the re-sent transaction out too: it is still followed,
  // and lands again.
  await anvil("anvil_reorg", [1, []]);
  assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payTo), 0n, "the reorg took it out");
  await until(
    "the re-sent payment on the chain again",
    async () => (await usdcBalance(stack.rpcUrl, stack.usdc, payTo)) === 4_567n,
    30_000,
  );
  const final = await rowById(stack, row.id);
  assert.equal(final.status, "succeeded");
  const receipt = await chain.getTransactionReceipt({ hash: final.transaction as Hex });
  assert.equal(receipt.status, "success", "the row names the transaction on the chain");
  assert.deepEqual(await eventsOf(stack, row.id), ["settlement.succeeded"], "no settlement.failed");
  assert.equal(await quotaUsed(stack), used, "still charged, once");
});
