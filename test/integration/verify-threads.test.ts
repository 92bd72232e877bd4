/**
 * Verify threads as an operator meets them: they start when verification
 * gets busy and stop when it is quiet; a thread that dies takes no
 * verification with it (each one it held is answered on the service's
 * thread, and another thread takes over); an RPC outage seen from a thread
 * is still 503, never the payer's fault; and settling is untouched by them.
 * (That a thread answers exactly as the service's thread does is the
 * two-mode run of verify.test.ts.)
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { requirementsFor, signPayment, usdcBalance } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { until } from "../support/processes.js";
import { startRpcProxy, type RpcProxy } from "../support/rpcProxy.js";
import { startStack, type TestStack } from "../support/stack.js";

const PAY_TO = "0x7373737373737373737373737373737373737373" as Hex;
/** Verifications in one second that start the threads. */
const START_AT = 5;

describe("verify threads", () => {
  let stack: TestStack;
  let proxy: RpcProxy;
  let amount = 1_000;

  before(async () => {
    stack = await startStack({
      env: {
        EVM_RPC_BATCH_SIZE: "0",
        EVM_VERIFY_THREADS: "1",
        EVM_VERIFY_THREADS_ABOVE: String(START_AT),
      },
      verifyThreadsIdleStopMs: 1_500,
      baseRpcUrl: async (nodeUrl) => {
        proxy = await startRpcProxy(nodeUrl);
        return proxy.url;
      },
    });
  });
  after(async () => {
    await stack.stop();
    await proxy.close();
  });

  const pool = () => stack.service.facilitator.threads!;
  const gauge = async () => (await stack.service.metrics.verifyThreads.get()).values[0]?.value ?? 0;
  const onThread = async () =>
    (await stack.service.metrics.verifiedOnThread.get()).values[0]?.value ?? 0;

  /** A distinct payment each time (a new amount), so no cache answers it. */
  const body = async (payer = 0) => {
    const requirements = requirementsFor({
      network: stack.network,
      usdc: stack.usdc,
      payTo: PAY_TO,
      amount: String(amount++),
    });
    return {
      x402Version: 2,
      paymentPayload: await signPayment(stack.payerKeys[payer]!, requirements),
      paymentRequirements: requirements,
    };
  };
  const verify = async (b: unknown) => {
    const res = await post(stack.url, "/verify", b, stack.apiKey);
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  };
  /** Keeps verification busy until a thread is ready (busy enough to start one). */
  const busyUntilReady = () =>
    until("a ready verify thread", async () => {
      await Promise.all(Array.from({ length: START_AT }, async () => verify(await body())));
      return pool().readyCount === 1;
    });

  test("threads start when verification is busy, answer it, and stop when it is quiet", async () => {
    await until(
      "no thread (quiet)",
      async () => pool().readyCount === 0 && pool().workers.length === 0,
    );
    assert.equal(await gauge(), 0);
    // Fewer than START_AT in a second start nothing, and are answered here.
    const before = await onThread();
    const quiet = await verify(await body());
    assert.deepEqual(quiet.json["isValid"], true);
    assert.equal(pool().workers.length, 0, "one verification does not start a thread");
    assert.equal(await onThread(), before);

    await busyUntilReady();
    assert.equal(await gauge(), 1);
    const atReady = await onThread();
    const answer = await verify(await body(1));
    assert.equal(answer.status, 200);
    assert.equal(answer.json["isValid"], true);
    assert.equal(answer.json["payer"], privateKeyToAccount(stack.payerKeys[1]!).address);
    assert.equal(await onThread(), atReady + 1, "the ready thread answered it");

    await until("the idle thread stopped", async () => pool().workers.length === 0);
    assert.equal(await gauge(), 0);
  });

  test("a thread that dies takes no verification with it, and another takes over", async () => {
    await busyUntilReady();
    const [worker] = pool().workers;
    const bodies = await Promise.all(Array.from({ length: 20 }, () => body()));
    // A stalled RPC keeps every one of them inside the thread when it dies.
    proxy.hold();
    let settled: Awaited<ReturnType<typeof verify>>[];
    try {
      const answers = Promise.all(bodies.map(verify));
      await until("all 20 held by the thread", async () => pool().inFlight === bodies.length);
      await worker!.terminate();
      assert.equal(pool().inFlight, 0, "the dead thread holds nothing");
      proxy.release();
      settled = await answers;
    } finally {
      proxy.release();
    }
    assert.deepEqual(
      settled.map((a) => [a.status, a.json["isValid"]]),
      bodies.map(() => [200, true]),
      "every verification the thread held was answered, and truly",
    );
    // A replacement starts (after a short delay) while verification stays busy.
    await until("a replacement thread", async () => {
      await verify(await body());
      return pool().readyCount === 1 && pool().workers[0] !== worker;
    });
    const before = await onThread();
    assert.equal((await verify(await body())).json["isValid"], true);
    assert.equal(await onThread(), before + 1, "the replacement answers");
  });

  test("an RPC outage seen from a thread is 503, not the payer's fault", async () => {
    await busyUntilReady();
    const b = await body(2);
    proxy.state.down = true;
    try {
      const res = await post(stack.url, "/verify", b, stack.apiKey);
      assert.equal(res.status, 503, await res.clone().text());
      const json = (await res.json()) as Record<string, unknown>;
      assert.equal(json["error"], "service_unavailable");
      assert.equal(json["isValid"], undefined, "no payment verdict");
    } finally {
      proxy.state.down = false;
    }
    const back = await verify(b);
    assert.equal(back.json["isValid"], true, JSON.stringify(back.json));
  });

  test("settling while threads verify moves the money once, from the service's thread", async () => {
    await busyUntilReady();
    const b = await body(3);
    const verified = await verify(b);
    assert.equal(verified.json["isValid"], true);
    const paidBefore = await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO);
    const settled = await post(stack.url, "/settle", b, stack.apiKey);
    assert.equal(settled.status, 200);
    const answer = (await settled.json()) as Record<string, unknown>;
    assert.equal(answer["success"], true);
    const amountPaid = BigInt(b.paymentRequirements.amount);
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO), paidBefore + amountPaid);
    const rows = await stack.service.db
      .selectFrom("settlements")
      .select(["status", "transaction"])
      .where("amount", "=", b.paymentRequirements.amount)
      .execute();
    assert.deepEqual(rows, [{ status: "succeeded", transaction: answer["transaction"] }]);
  });
});
