/**
 * Replicas share their rate limits and each payer's one settle in flight
 * through Redis. Two production replicas on one PostgreSQL server without
 * it would each count alone, so they refuse payments (503, `/ready` false)
 * until one stops; one alone, or a restart after a replica died, serves.
 * And production's `/metrics` is closed without `METRICS_TOKEN`.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Hex } from "viem";
import { startDevnet, type Devnet } from "../../devnet/evm/index.js";
import { createService, type Service } from "../../src/app.js";
import { loadConfig } from "../../src/config/index.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { setAccountPlan } from "../../src/features/plans/quotaLedger.js";
import { REPLICAS_WITHOUT_REDIS } from "../../src/features/health/replicaGuard.js";
import type { OpenedDb } from "../../src/storage/db.js";
import { openTestDb } from "../support/database.js";
import { post } from "../support/http.js";
import { until } from "../support/processes.js";
import { requirementsFor, signPayment } from "../chains/evm/payments.js";

const PAY_TO = "0x8888888888888888888888888888888888888888" as Hex;
const CHECK_MS = 200;

describe(
  "production replicas without Redis",
  { skip: !process.env["TEST_DATABASE_URL"] && !process.env["CI"] && "needs TEST_DATABASE_URL" },
  () => {
    let devnet: Devnet;
    let db: OpenedDb & { url?: string };
    const running: Service[] = [];

    before(async () => {
      devnet = await startDevnet({
        blockTimeSeconds: 0,
        outFile: null,
        facilitators: 2,
        payers: 8,
      });
      db = await openTestDb("postgres");
    });
    after(async () => {
      await Promise.all(running.map((s) => s.close()));
      await db.close();
      await devnet.stop();
    });

    async function replica(env: Record<string, string> = {}): Promise<{ s: Service; url: string }> {
      const info = devnet.networks["eip155:8453"]!;
      const s = await createService({
        overrides: {
          collectProcessMetrics: false,
          pollingIntervalMs: 50,
          replicaCheckMs: CHECK_MS,
        },
        config: loadConfig({
          EVM_RPC_URLS_8453: info.rpcUrl,
          EVM_PRIVATE_KEYS: (info.facilitatorPrivateKeys as Hex[]).join(","),
          DATABASE_URL: db.url!,
          PORT: "0",
          HOST: "127.0.0.1",
          LOG_LEVEL: "silent",
          ...env,
        }),
        database: db,
        chains: {
          eip155: {
            networks: [{ id: "eip155:8453", rpcUrls: [info.rpcUrl] }],
            privateKeys: info.facilitatorPrivateKeys as Hex[],
          },
        },
      });
      running.push(s);
      return { s, url: await s.listen() };
    }

    async function payment(i: number) {
      const info = devnet.networks["eip155:8453"]!;
      const requirements = requirementsFor({
        network: "eip155:8453",
        usdc: info.assets["USDC"]!,
        payTo: PAY_TO,
        amount: "100",
      });
      return {
        x402Version: 2,
        paymentPayload: await signPayment(info.payerPrivateKeys[i] as Hex, requirements),
        paymentRequirements: requirements,
      };
    }

    /**
     * Until every live replica's row (not `except`) was renewed `times`
     * times more: each replica has looked at the others as often.
     */
    async function renewed(times: number, except: readonly string[] = []): Promise<void> {
      const seen = new Map<string, { at: number; n: number }>();
      await until("the replicas renew their rows", async () => {
        const rows = (
          await db.db.selectFrom("facilitator_replicas").select(["holder", "expires_at"]).execute()
        ).filter((r) => !except.includes(r.holder));
        for (const r of rows) {
          const at = new Date(r.expires_at).getTime();
          const before = seen.get(r.holder);
          if (!before) seen.set(r.holder, { at, n: 0 });
          else if (at > before.at) seen.set(r.holder, { at, n: before.n + 1 });
        }
        return (rows.length > 0 && rows.every((r) => seen.get(r.holder)!.n >= times)) || undefined;
      });
    }

    async function close(s: Service): Promise<void> {
      running.splice(running.indexOf(s), 1);
      await s.close();
    }

    test("a second replica makes both refuse payments, nothing is recorded, and the one left serves again", async () => {
      const account = await createAccount(db.db, "replicas-no-redis");
      await setAccountPlan(db.db, account.id, "max");
      const key = (await createApiKey(db.db, account.id, "k")).key;

      const a = await replica();
      // Alone, A verifies.
      const alone = await post(a.url, "/verify", await payment(0), key);
      assert.equal(alone.status, 200);
      assert.equal(((await alone.json()) as { isValid: boolean }).isValid, true);

      const b = await replica();
      for (const r of [a, b]) {
        await until("the other replica is seen", async () => {
          const res = await post(r.url, "/verify", await payment(1), key);
          return res.status === 503 ? res : undefined;
        });
        const settle = await post(r.url, "/settle", await payment(2), key);
        assert.equal(settle.status, 503);
        const body = (await settle.json()) as { error: string; message: string };
        assert.equal(body.error, "service_unavailable");
        assert.equal(body.message, REPLICAS_WITHOUT_REDIS);
        const ready = await fetch(`${r.url}/ready`);
        assert.equal(ready.status, 503);
        const report = (await ready.json()) as { ready: boolean; replicas?: { ok: boolean } };
        assert.deepEqual(report.replicas, { ok: false });
      }
      const rows = await db.db.selectFrom("settlements").select("id").execute();
      assert.equal(rows.length, 0, "a refused settle leaves no record and sends nothing");

      await close(b.s);
      await until("A serves again once B is gone", async () => {
        const res = await post(a.url, "/verify", await payment(3), key);
        return res.status === 200 ? res : undefined;
      });
      const settled = await post(a.url, "/settle", await payment(4), key);
      assert.equal(((await settled.json()) as { success: boolean }).success, true);
      await close(a.s);
    });

    test("a replica that died leaves a row that never moves: a restart after it serves at once", async () => {
      const account = await createAccount(db.db, "replicas-dead");
      const key = (await createApiKey(db.db, account.id, "k")).key;
      // A replica killed a moment ago: its row is unexpired, and never renewed again.
      await db.db
        .insertInto("facilitator_replicas")
        .values({ holder: "dead-host:1:deadbeef", expires_at: new Date(Date.now() + 60_000) })
        .execute();
      const a = await replica();
      // Several checks later it still serves.
      await renewed(3, ["dead-host:1:deadbeef"]);
      const res = await post(a.url, "/verify", await payment(5), key);
      assert.equal(res.status, 200);
      assert.equal((await fetch(`${a.url}/ready`)).status, 200);
      await close(a.s);
      await db.db.deleteFrom("facilitator_replicas").execute();
    });

    test("with Redis, two replicas both serve", async () => {
      const redisUrl = process.env["TEST_REDIS_URL"];
      if (!redisUrl) {
        assert.ok(!process.env["CI"], "CI runs Redis (see .ci/run)");
        return;
      }
      const account = await createAccount(db.db, "replicas-redis");
      const key = (await createApiKey(db.db, account.id, "k")).key;
      const a = await replica({ REDIS_URL: redisUrl });
      const b = await replica({ REDIS_URL: redisUrl });
      await renewed(3);
      for (const [i, r] of [a, b].entries()) {
        const res = await post(r.url, "/verify", await payment(6 + i), key);
        assert.equal(res.status, 200);
      }
      await close(b.s);
      await close(a.s);
    });

    test("production's /metrics is closed without METRICS_TOKEN, open with METRICS_PUBLIC, and takes the token when set", async () => {
      const token = "a-metrics-token-long-enough";
      const closed = await replica();
      const refused = await fetch(`${closed.url}/metrics`);
      assert.equal(refused.status, 401);
      assert.match(((await refused.json()) as { message: string }).message, /METRICS_TOKEN/);
      await close(closed.s);

      const open = await replica({ METRICS_PUBLIC: "true" });
      const served = await fetch(`${open.url}/metrics`);
      assert.equal(served.status, 200);
      assert.match(await served.text(), /x402_/);
      await close(open.s);

      const guarded = await replica({ METRICS_TOKEN: token });
      assert.equal((await fetch(`${guarded.url}/metrics`)).status, 401);
      const withToken = await fetch(`${guarded.url}/metrics`, {
        headers: { authorization: `Bearer ${token}` },
      });
      assert.equal(withToken.status, 200);
      await close(guarded.s);
    });
  },
);
