/**
 * An RPC outage is not the payer's fault. With the chain's RPC unreachable:
 * - /verify and /settle answer 503 `service_unavailable` with Retry-After,
 *   never a payment reason such as `invalid_exact_evm_signature`;
 * - /settle sends nothing, and records the attempt as `not_attempted`, with
 *   no `settlement.failed` event;
 * - /health stays a liveness check (200); /ready says which dependency is
 *   down (503), and the reachability gauge reads 0;
 * and once the RPC is back, the same payment settles.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createPublicClient, http, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { sql } from "kysely";
import { startDevnet, type Devnet } from "../../devnet/index.js";
import { createService, type Service } from "../../src/app.js";
import { loadConfig } from "../../src/config/index.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { setWebhookEndpoint } from "../../src/features/webhooks/webhookRepository.js";
import { openTestDb } from "../support/database.js";
import { post, requirementsFor, signPayment, usdcBalance } from "../support/payments.js";
import { until } from "../support/processes.js";
import { startRpcProxy, type RpcProxy } from "../support/rpcProxy.js";

const PAY_TO = "0x8181818181818181818181818181818181818181" as Hex;

describe("an RPC outage", () => {
  let devnet: Devnet;
  let proxy: RpcProxy;
  let service: Service;
  let url: string;
  let apiKey: string;
  let accountId: string;
  let closeDb: () => Promise<void>;

  before(async () => {
    devnet = await startDevnet({ blockTimeSeconds: 0, outFile: null });
    const info = devnet.networks["eip155:8453"]!;
    proxy = await startRpcProxy(info.rpcUrl);
    const proxyUrl = proxy.url;
    const db = await openTestDb("pglite");
    closeDb = db.close;
    service = await createService({
      overrides: { collectProcessMetrics: false, pollingIntervalMs: 50 },
      config: loadConfig({
        FACILITATOR_MODE: "devnet",
        PORT: "0",
        HOST: "127.0.0.1",
        LOG_LEVEL: "silent",
        EVM_RPC_BATCH_SIZE: "0",
      }),
      database: db,
      chains: {
        eip155: {
          networks: [{ id: "eip155:8453", rpcUrls: [proxyUrl] }],
          privateKeys: info.facilitatorPrivateKeys as Hex[],
        },
      },
    });
    url = await service.listen();
    const account = await createAccount(service.db, "outage");
    accountId = account.id;
    apiKey = (await createApiKey(service.db, account.id, "outage")).key;
    await setWebhookEndpoint(service.db, account.id, "http://127.0.0.1:9/hook", {
      allowPrivateTargets: true,
    });
  });
  after(async () => {
    await service.close();
    await closeDb();
    await proxy.close();
    await devnet.stop();
  });

  const body = async (payer = 0) => {
    const info = devnet.networks["eip155:8453"]!;
    const requirements = requirementsFor({
      network: "eip155:8453",
      usdc: info.assets["USDC"]!,
      payTo: PAY_TO,
      amount: "700",
    });
    return {
      x402Version: 2,
      paymentPayload: await signPayment(info.payerPrivateKeys[payer] as Hex, requirements),
      paymentRequirements: requirements,
    };
  };

  test("verify and settle answer 503, nothing is sent or blamed, and /ready says why", async () => {
    const info = devnet.networks["eip155:8453"]!;
    const b = await body(0);
    // Warm the token's domain cache first, as a running service has it. (A
    // payment already verified in this block is answered from the per-block
    // cache, outage or not: that answer is still true for the block.)
    assert.equal((await post(url, "/verify", await body(1), apiKey)).status, 200);
    const paidBefore = await usdcBalance(info.rpcUrl, info.assets["USDC"]!, PAY_TO);

    proxy.state.down = true;
    try {
      const verify = await post(url, "/verify", b, apiKey);
      assert.equal(verify.status, 503, await verify.clone().text());
      assert.ok(Number(verify.headers.get("retry-after")) > 0);
      const verifyBody = (await verify.json()) as Record<string, unknown>;
      assert.equal(verifyBody["error"], "service_unavailable");
      assert.match(String(verifyBody["message"]), /RPC/);

      const settle = await post(url, "/settle", b, apiKey);
      assert.equal(settle.status, 503, await settle.clone().text());
      assert.equal(
        ((await settle.json()) as Record<string, unknown>)["error"],
        "service_unavailable",
      );

      const rows = await service.db
        .selectFrom("settlements")
        .select(["id", "status", "error_reason"])
        .where("account_id", "=", accountId)
        .execute();
      assert.deepEqual(
        rows.map((r) => [r.status, r.error_reason]),
        [["not_attempted", "service_unavailable"]],
      );
      const events = await service.db
        .selectFrom("webhook_events")
        .select("type")
        .where("account_id", "=", accountId)
        .execute();
      assert.deepEqual(events, [], "no settlement.failed event for an outage");

      assert.equal((await fetch(`${url}/health`)).status, 200, "liveness stays green");
      const ready = await fetch(`${url}/ready`);
      assert.equal(ready.status, 503);
      const report = (await ready.json()) as {
        error: string;
        message: string;
        database: { ok: boolean };
        networks: { network: string; reachable: boolean; host: string }[];
      };
      assert.equal(report.error, "service_unavailable");
      assert.equal(report.database.ok, true);
      assert.deepEqual(
        report.networks.map((n) => [n.network, n.reachable]),
        [["eip155:8453", false]],
      );
      assert.match(report.message, /eip155:8453 RPC/);
      assert.doesNotMatch(JSON.stringify(report), /http:\/\//, "hosts only, never URLs");
      const metrics = await (await fetch(`${url}/metrics`)).text();
      assert.match(metrics, /x402_rpc_reachable\{network="eip155:8453"\} 0/);
    } finally {
      proxy.state.down = false;
    }

    assert.equal(
      await usdcBalance(info.rpcUrl, info.assets["USDC"]!, PAY_TO),
      paidBefore,
      "nothing moved during the outage",
    );
    // Back up: the same payment settles, as a new attempt.
    await until("/ready to see the RPC again", async () => (await fetch(`${url}/ready`)).ok);
    const settled = (await (await post(url, "/settle", b, apiKey)).json()) as { success: boolean };
    assert.equal(settled.success, true, JSON.stringify(settled));
    assert.equal(await usdcBalance(info.rpcUrl, info.assets["USDC"]!, PAY_TO), paidBefore + 700n);
  });

  test("a payment refused only because the RPC failed is checked afresh once it is back", async () => {
    // The block's verify cache must not keep a verdict reached while the RPC
    // failed (a failed code read reads as a bad signature). No block is mined
    // here, so a kept verdict would be served for as long as the test runs.
    const b = await body(3);
    assert.equal((await post(url, "/verify", await body(1), apiKey)).status, 200);
    proxy.state.down = true;
    try {
      assert.equal((await post(url, "/verify", b, apiKey)).status, 503);
    } finally {
      proxy.state.down = false;
    }
    await until("/ready to see the RPC again", async () => (await fetch(`${url}/ready`)).ok);
    const again = (await (await post(url, "/verify", b, apiKey)).json()) as Record<string, unknown>;
    assert.equal(again["isValid"], true, JSON.stringify(again));
  });

  test("a database that fails to journal the transaction: 503, nothing broadcast, not the payer's failure", async () => {
    const info = devnet.networks["eip155:8453"]!;
    const b = await body(2);
    const rpc = createPublicClient({ transport: http(info.rpcUrl) });
    const nonces = async () => {
      let n = 0;
      for (const key of info.facilitatorPrivateKeys) {
        n += await rpc.getTransactionCount({
          address: privateKeyToAccount(key as Hex).address,
          blockTag: "pending",
        });
      }
      return n;
    };
    const noncesBefore = await nonces();
    await sql`ALTER TABLE settlement_transactions RENAME TO settlement_transactions_away`.execute(
      service.db,
    );
    let res: Response;
    try {
      res = await post(url, "/settle", b, apiKey);
    } finally {
      await sql`ALTER TABLE settlement_transactions_away RENAME TO settlement_transactions`.execute(
        service.db,
      );
    }
    const json = (await res.json()) as Record<string, unknown>;
    assert.equal(res.status, 503, JSON.stringify(json));
    assert.equal(json["error"], "service_unavailable");
    assert.equal(await nonces(), noncesBefore, "nothing was broadcast");
    const payer = privateKeyToAccount(info.payerPrivateKeys[2] as Hex).address.toLowerCase();
    const rows = await service.db
      .selectFrom("settlements")
      .select(["status", "error_reason"])
      .where("payer", "=", payer)
      .execute();
    assert.deepEqual(
      rows.map((r) => [r.status, r.error_reason]),
      [["not_attempted", "service_unavailable"]],
    );
  });
});
