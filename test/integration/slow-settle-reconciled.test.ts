/**
 * A settle slower than the reconciler's horizon (its provider stalls on the
 * payment's calls before anything is sent) while the reconciler judges its
 * pending row. The reconciler finds nothing journaled and records
 * "interrupted, nothing was sent". The settle then resumes: it must not
 * send, since the record already says nothing moved, and it answers what
 * the record says. Before, it sent: the payTo was paid, and the record said
 * failed. The payment, never spent, still settles once when presented again.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createPublicClient, http, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { startDevnet, type Devnet } from "../../devnet/evm/index.js";
import { requirementsFor, signPayment, usdcBalance } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { until } from "../support/processes.js";
import { startRpcProxy, type RpcProxy } from "../support/rpcProxy.js";
import { startEvmService, type EvmService } from "../support/evmService.js";
import type { Service } from "../../src/app.js";

const PAY_TO = "0xcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd" as Hex;

describe("a settle that outlives the reconciler's horizon", () => {
  let devnet: Devnet;
  let proxy: RpcProxy;
  let fixture: EvmService;
  let service: Service;
  let url: string;
  let apiKey: string;

  before(async () => {
    devnet = await startDevnet({ blockTimeSeconds: 1, outFile: null });
    proxy = await startRpcProxy(devnet.networks["eip155:8453"]!.rpcUrl);
    fixture = await startEvmService({
      devnet,
      rpcUrl: proxy.url,
      env: { RECONCILE_AFTER_MS: "0" },
      // The test runs the reconciler itself, at the moment it means to.
      reconcile: false,
      accountName: "slow",
    });
    ({ service, url, apiKey } = fixture);
  });
  after(async () => {
    proxy.release();
    await fixture.close();
    await proxy.close();
    await devnet.stop();
  });

  test("judged interrupted while it stalls: it sends nothing afterwards, and the record and the chain agree", async () => {
    const info = devnet.networks["eip155:8453"]!;
    const usdc = info.assets["USDC"]!;
    const requirements = requirementsFor({
      network: "eip155:8453",
      usdc,
      payTo: PAY_TO,
      amount: "4242",
    });
    const body = {
      x402Version: 2,
      paymentPayload: await signPayment(info.payerPrivateKeys[3] as Hex, requirements),
      paymentRequirements: requirements,
    };
    const paidBefore = await usdcBalance(info.rpcUrl, usdc, PAY_TO);
    // Every call that carries the payment (its simulation, its estimate, its
    // broadcast: they all name the payTo) stalls; the reconciler's own read
    // of the authorization does not.
    proxy.hold(PAY_TO.slice(2).toLowerCase());
    const answer = post(url, "/settle", body, apiKey).then(async (r) => ({
      status: r.status,
      json: (await r.json()) as { success?: boolean; errorReason?: string },
    }));
    const row = await until("the settle to stall with its row pending", async () => {
      const r = await service.db
        .selectFrom("settlements")
        .selectAll()
        .where("amount", "=", "4242")
        .executeTakeFirst();
      return r?.status === "pending" && proxy.waiting > 0 ? r : undefined;
    });
    assert.equal(await service.workers.reconciler.runOnce(), 1, "the reconciler judged the row");
    const judged = (await service.db
      .selectFrom("settlements")
      .selectAll()
      .where("id", "=", row.id)
      .executeTakeFirst())!;
    assert.deepEqual(
      [judged.status, judged.error_reason, judged.transaction],
      ["failed", "settlement_interrupted", null],
    );

    proxy.release();
    const settled = await answer;
    // Answered as the record says: interrupted, nothing transferred.
    assert.deepEqual(
      [settled.status, settled.json.success, settled.json.errorReason],
      [200, false, "settlement_interrupted"],
      JSON.stringify(settled),
    );
    // Whatever the settle says, no transaction of it is journaled or sent.
    const journal = await service.db
      .selectFrom("settlement_transactions")
      .select("reference")
      .where("settlement_id", "=", row.id)
      .execute();
    assert.deepEqual(journal, [], "nothing journaled after the judgement");
    // Two blocks later the payTo still has nothing from it.
    const chain = createPublicClient({ transport: http(info.rpcUrl) });
    const answeredAt = await chain.getBlockNumber();
    await until("two more blocks", async () => (await chain.getBlockNumber()) >= answeredAt + 2n);
    assert.equal(await usdcBalance(info.rpcUrl, usdc, PAY_TO), paidBefore, "nothing was paid");
    const final = (await service.db
      .selectFrom("settlements")
      .selectAll()
      .where("id", "=", row.id)
      .executeTakeFirst())!;
    assert.deepEqual([final.status, final.transaction], ["failed", null]);
    // Nothing of it moved, so the payer's authorization is still good: the
    // same payment presented again settles, once.
    const again = (await (await post(url, "/settle", body, apiKey)).json()) as {
      success: boolean;
      transaction: string;
    };
    assert.equal(again.success, true, JSON.stringify(again));
    assert.equal(await usdcBalance(info.rpcUrl, usdc, PAY_TO), paidBefore + 4242n);
    const rows = await service.db
      .selectFrom("settlements")
      .select(["status", "transaction"])
      .where("amount", "=", "4242")
      .orderBy("started_at")
      .execute();
    assert.deepEqual(rows, [
      { status: "failed", transaction: null },
      { status: "succeeded", transaction: again.transaction },
    ]);
    // The refused send had taken a nonce: a filler (journaled as the
    // account's, not the settlement's) closed the gap, so no later
    // transaction of that account waits behind it.
    for (const key of info.facilitatorPrivateKeys as Hex[]) {
      const address = privateKeyToAccount(key).address;
      await until(`${address}'s transactions all mined`, async () => {
        const [mined, sent] = await Promise.all([
          chain.getTransactionCount({ address, blockTag: "latest" }),
          chain.getTransactionCount({ address, blockTag: "pending" }),
        ]);
        return mined === sent;
      });
    }
    const fillers = await service.db
      .selectFrom("settlement_transactions")
      .select("reference")
      .where("settlement_id", "is", null)
      .execute();
    assert.equal(fillers.length, 1, "one gap filler, unbound");
  });
});
