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
import { startDevnet, type Devnet } from "../../devnet/index.js";
import { createService, type Service } from "../../src/app.js";
import { loadConfig } from "../../src/config/index.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { openTestDb } from "../support/database.js";
import { post, requirementsFor, signPayment, usdcBalance } from "../support/payments.js";
import { until } from "../support/processes.js";
import { startRpcProxy, type RpcProxy } from "../support/rpcProxy.js";

const PAY_TO = "0x7373737373737373737373737373737373737373" as Hex;
const NETWORK = "eip155:8453";
/** Verifications in one second that start the threads. */
const START_AT = 5;

describe("verify threads", () => {
  let devnet: Devnet;
  let proxy: RpcProxy;
  let service: Service;
  let url: string;
  let apiKey: string;
  let closeDb: () => Promise<void>;
  let amount = 1_000;

  before(async () => {
    devnet = await startDevnet({ blockTimeSeconds: 0, outFile: null });
    proxy = await startRpcProxy(devnet.networks[NETWORK]!.rpcUrl);
    const db = await openTestDb("pglite");
    closeDb = db.close;
    service = await createService({
      config: loadConfig({
        FACILITATOR_MODE: "devnet",
        PORT: "0",
        HOST: "127.0.0.1",
        LOG_LEVEL: "silent",
        EVM_RPC_BATCH_SIZE: "0",
        EVM_VERIFY_THREADS: "1",
        EVM_VERIFY_THREADS_ABOVE: String(START_AT),
      }),
      database: db,
      collectProcessMetrics: false,
      pollingIntervalMs: 50,
      verifyThreadsIdleStopMs: 1_500,
      chains: {
        evm: {
          networks: [{ id: NETWORK, rpcUrls: [proxy.url] }],
          privateKeys: devnet.networks[NETWORK]!.facilitatorPrivateKeys as Hex[],
        },
      },
    });
    url = await service.listen();
    const account = await createAccount(service.db, "threads");
    apiKey = (await createApiKey(service.db, account.id, "threads")).key;
  });
  after(async () => {
    await service.close();
    await closeDb();
    await proxy.close();
    await devnet.stop();
  });

  const pool = () => service.verifyThreads!;
  const gauge = async () => (await service.metrics.verifyThreads.get()).values[0]?.value ?? 0;
  const onThread = async () => (await service.metrics.verifiedOnThread.get()).values[0]?.value ?? 0;

  /** A distinct payment each time (a new amount), so no cache answers it. */
  const body = async (payer = 0) => {
    const info = devnet.networks[NETWORK]!;
    const requirements = requirementsFor({
      network: NETWORK,
      usdc: info.assets["USDC"]!,
      payTo: PAY_TO,
      amount: String(amount++),
    });
    return {
      x402Version: 2,
      paymentPayload: await signPayment(info.payerPrivateKeys[payer] as Hex, requirements),
      paymentRequirements: requirements,
    };
  };
  const verify = async (b: unknown) => {
    const res = await post(url, "/verify", b, apiKey);
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
    assert.equal(
      answer.json["payer"],
      privateKeyToAccount(devnet.networks[NETWORK]!.payerPrivateKeys[1] as Hex).address,
    );
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
      const res = await post(url, "/verify", b, apiKey);
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
    const info = devnet.networks[NETWORK]!;
    const b = await body(3);
    const verified = await verify(b);
    assert.equal(verified.json["isValid"], true);
    const paidBefore = await usdcBalance(info.rpcUrl, info.assets["USDC"]!, PAY_TO);
    const settled = await post(url, "/settle", b, apiKey);
    assert.equal(settled.status, 200);
    const answer = (await settled.json()) as Record<string, unknown>;
    assert.equal(answer["success"], true);
    const amountPaid = BigInt(b.paymentRequirements.amount);
    assert.equal(
      await usdcBalance(info.rpcUrl, info.assets["USDC"]!, PAY_TO),
      paidBefore + amountPaid,
    );
    const rows = await service.db
      .selectFrom("settlements")
      .select(["status", "transaction"])
      .where("amount", "=", b.paymentRequirements.amount)
      .execute();
    assert.deepEqual(rows, [{ status: "succeeded", transaction: answer["transaction"] }]);
  });
});
