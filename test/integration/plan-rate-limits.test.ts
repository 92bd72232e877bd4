/**
 * Rate limits of a hosted API: each account (all its API keys together) has its plan's budget, and the
 * per-IP budget guards only what takes no key, plus refused keys.
 * - A key over its plan's limit: 429, Retry-After, the JSON envelope naming
 *   the plan and the upgrade path; its settle is never run.
 * - Another account's key at the same address is unaffected.
 * - Refused keys spend the address's budget; valid keys from it never do.
 * - A plan upgrade raises the limit within the current window (the count so
 *   far stays).
 * - Two service instances sharing Redis share one count per key.
 * - Redis unreachable: requests are served, not refused.
 * Budgets are counted in requests over long windows: nothing here is timed.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import type { Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { startStack, type TestStack } from "../support/stack.js";
import { availableBackends, openTestDb } from "../support/database.js";
import { requirementsFor, signPayment, usdcBalance } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { freePort, until } from "../support/processes.js";
import { startDevnet, type Devnet } from "../../devnet/evm/index.js";
import { createService, type Service } from "../../src/app.js";
import { loadConfig } from "../../src/config/index.js";
import { openMigratedDb, type Db, type OpenedDb } from "../../src/storage/db.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { API_KEYS_CHANGED, createApiKey, deleteApiKey } from "../../src/features/keys/apiKeys.js";
import { listenForChanges } from "../../src/storage/changeFeed.js";
import { createLogger } from "../../src/lib/logger.js";
import { setAccountPlan } from "../../src/features/plans/quotaLedger.js";
import { UPGRADE_PATH, type PlanName } from "../../src/features/plans/plans.js";
import { generateApiKey } from "../../src/features/keys/apiKeyFormat.js";

const PAY_TO = "0x4444444444444444444444444444444444444444" as Hex;
const redisUrl = process.env["TEST_REDIS_URL"];
if (!redisUrl && process.env["CI"]) {
  throw new Error("CI is set but TEST_REDIS_URL is not: start Redis (see .ci/run)");
}

/** Small budgets over ten-minute windows: a test spends them by counting, never by waiting. */
const LIMITS = {
  TRUST_PROXY: "true",
  RATE_LIMIT_MAX: "4",
  RATE_LIMIT_WINDOW_MS: "600000",
  RATE_LIMIT_PER_KEY: "true",
  RATE_LIMIT_PLAN_WINDOW_MS: "600000",
  RATE_LIMIT_PLAN_FREE: "3",
  // Above the polls a test may spend waiting for an upgrade to be seen.
  RATE_LIMIT_PLAN_STARTER: "1000",
  RATE_LIMIT_PLAN_PRO: "20",
};

/** A client address of the test's own (through the trusted proxy header): budgets never mix across tests or runs. */
function clientAddress(): string {
  const [a, b] = randomBytes(2);
  return `198.18.${a!}.${(b! % 254) + 1}`;
}

async function accountKey(db: Db, plan: PlanName) {
  const account = await createAccount(db, `rate-${plan}`);
  if (plan !== "free") await setAccountPlan(db, account.id, plan);
  const key = await createApiKey(db, account.id, "rate");
  return { accountId: account.id, keyId: key.id, key: key.key };
}

/** GET /api/billing/upgrade: the cheapest route that takes an API key. */
function planStatus(url: string, ip: string, apiKey?: string) {
  return fetch(`${url}${UPGRADE_PATH}`, {
    headers: { "x-forwarded-for": ip, ...(apiKey ? { "x-api-key": apiKey } : {}) },
  });
}

interface Envelope {
  error: string;
  message: string;
  requestId: string;
  plan?: string;
  limit?: number;
  windowSeconds?: number;
  upgrade?: string;
}

for (const backend of availableBackends()) {
  const shared = backend === "postgres" && redisUrl ? redisUrl : undefined;
  describe(`per-key rate limits by plan (${backend}${shared ? ", Redis" : ", in process"})`, () => {
    let stack: TestStack;
    before(async () => {
      stack = await startStack({
        backend,
        env: { ...LIMITS, ...(shared ? { REDIS_URL: shared } : {}) },
      });
    });
    after(() => stack.stop());

    const settlementsOf = async (accountId: string) =>
      (
        await stack.service.db
          .selectFrom("settlements")
          .select("id")
          .where("account_id", "=", accountId)
          .execute()
      ).length;

    test("a key over its plan's limit gets 429, Retry-After and the JSON envelope, and its settle changes nothing; another account's key at the same address is unaffected", async () => {
      const ip = clientAddress();
      const limited = await accountKey(stack.service.db, "free");
      const other = await accountKey(stack.service.db, "free");
      const payerKey = stack.payerKeys[1]!;
      const payer = privateKeyToAccount(payerKey).address;
      const requirements = requirementsFor({
        network: stack.network,
        usdc: stack.usdc,
        payTo: PAY_TO,
      });
      const body = {
        x402Version: 2,
        paymentPayload: await signPayment(payerKey, requirements),
        paymentRequirements: requirements,
      };
      const headers = { "x-forwarded-for": ip };

      // The free plan's three requests: served, with the budget in the headers.
      for (const remaining of [2, 1, 0]) {
        const res = await post(stack.url, "/verify", body, limited.key, headers);
        assert.equal(res.status, 200);
        assert.equal(((await res.json()) as { isValid: boolean }).isValid, true);
        assert.equal(res.headers.get("x-ratelimit-limit"), "3");
        assert.equal(res.headers.get("x-ratelimit-remaining"), String(remaining));
      }
      const payerBefore = await usdcBalance(stack.rpcUrl, stack.usdc, payer);
      const refused = await post(stack.url, "/settle", body, limited.key, headers);
      assert.equal(refused.status, 429);
      assert.match(refused.headers.get("content-type") ?? "", /^application\/json/);
      const retryAfter = Number(refused.headers.get("retry-after"));
      assert.ok(retryAfter > 0 && retryAfter <= 600, `Retry-After in seconds: ${retryAfter}`);
      const envelope = (await refused.json()) as Envelope;
      assert.equal(envelope.error, "rate_limited");
      assert.match(envelope.requestId, /^req_/);
      assert.match(envelope.message, /API key/);
      assert.match(envelope.message, /free plan allows 3 requests per 10 minutes/);
      assert.ok(envelope.message.includes(UPGRADE_PATH), "says where to raise the limit");
      assert.equal(envelope.plan, "free");
      assert.equal(envelope.limit, 3);
      assert.equal(envelope.windowSeconds, 600);
      assert.equal(envelope.upgrade, UPGRADE_PATH);
      // Nothing ran: no settlement row, no transfer.
      assert.equal(await settlementsOf(limited.accountId), 0);
      assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payer), payerBefore);

      // Another account's key, same address: its own budget, and the very
      // same payment settles through it.
      const served = await post(stack.url, "/settle", body, other.key, headers);
      assert.equal(served.status, 200);
      assert.equal(served.headers.get("x-ratelimit-remaining"), "2");
      assert.equal(((await served.json()) as { success: boolean }).success, true);
      assert.equal(await settlementsOf(other.accountId), 1);
      assert.equal(await settlementsOf(limited.accountId), 0);
      assert.equal(
        await usdcBalance(stack.rpcUrl, stack.usdc, payer),
        payerBefore - BigInt(requirements.amount),
        "moved once, by the key within its budget",
      );
    });

    test("refused keys spend the address's budget; valid keys from that address are never counted against it", async () => {
      const ip = clientAddress();
      const valid = await accountKey(stack.service.db, "pro");
      const revoked = await accountKey(stack.service.db, "pro");
      assert.equal(await deleteApiKey(stack.service.db, revoked.keyId), true);

      // More valid-key requests than the address's budget of 4: all served.
      for (let i = 0; i < 6; i++) {
        const res = await planStatus(stack.url, ip, valid.key);
        assert.equal(res.status, 200, `valid request ${i + 1}`);
        assert.equal(res.headers.get("x-ratelimit-limit"), "20", "the key's budget, not the IP's");
      }
      // Four refused keys of every kind: 401s, each counted against the address.
      for (const key of [undefined, "not-a-key", generateApiKey(), revoked.key]) {
        const res = await planStatus(stack.url, ip, key);
        assert.equal(res.status, 401, `refused key ${String(key).slice(0, 12)}`);
        assert.equal(((await res.json()) as Envelope).error, "unauthorized");
      }
      // The fifth is over the address's budget.
      const guessed = await planStatus(stack.url, ip, generateApiKey());
      assert.equal(guessed.status, 429);
      assert.ok(Number(guessed.headers.get("retry-after")) > 0);
      const envelope = (await guessed.json()) as Envelope;
      assert.equal(envelope.error, "rate_limited");
      assert.match(envelope.message, /at most 4 per 10 minutes without a valid X-API-Key/);
      // The routes without a key share that address's budget...
      assert.equal(
        (await fetch(`${stack.url}/supported`, { headers: { "x-forwarded-for": ip } })).status,
        429,
      );
      // ...while a valid key from the same address is still served, on its own budget.
      const still = await planStatus(stack.url, ip, valid.key);
      assert.equal(still.status, 200);
      assert.equal(still.headers.get("x-ratelimit-remaining"), String(20 - 7));
      // Another address is untouched.
      const elsewhere = await fetch(`${stack.url}/supported`, {
        headers: { "x-forwarded-for": clientAddress() },
      });
      assert.equal(elsewhere.status, 200);
    });

    test("the budget is the account's: a second key shares it, and deleting the key and creating another does not start a fresh window", async () => {
      const ip = clientAddress();
      const first = await accountKey(stack.service.db, "free");
      const second = await createApiKey(stack.service.db, first.accountId, "second");
      assert.equal((await planStatus(stack.url, ip, first.key)).status, 200);
      const shared = await planStatus(stack.url, ip, second.key);
      assert.equal(shared.status, 200);
      assert.equal(shared.headers.get("x-ratelimit-remaining"), "1", "one count for both keys");
      assert.equal((await planStatus(stack.url, ip, first.key)).status, 200);
      assert.equal((await planStatus(stack.url, ip, first.key)).status, 429);
      // Both keys deleted, a fresh one created: the account's window goes on.
      assert.equal(await deleteApiKey(stack.service.db, first.keyId), true);
      assert.equal(await deleteApiKey(stack.service.db, second.id), true);
      const fresh = await createApiKey(stack.service.db, first.accountId, "fresh");
      const live = await stack.service.db
        .selectFrom("api_keys")
        .select("id")
        .where("account_id", "=", first.accountId)
        .where("revoked_at", "is", null)
        .execute();
      assert.deepEqual(
        live.map((k) => k.id),
        [fresh.id],
        "one live key: the old ones are gone",
      );
      const refused = await planStatus(stack.url, ip, fresh.key);
      assert.equal(refused.status, 429);
      assert.equal(((await refused.json()) as Envelope).error, "rate_limited");
      // Another account's key is on its own budget.
      const other = await accountKey(stack.service.db, "free");
      assert.equal((await planStatus(stack.url, ip, other.key)).status, 200);
    });

    test("pay-as-you-go has Free's request limit until it holds a prepaid balance", async () => {
      const ip = clientAddress();
      const unfunded = await accountKey(stack.service.db, "payg");
      const funded = await accountKey(stack.service.db, "payg");
      await stack.service.db
        .updateTable("accounts")
        .set({ balance_micro_usd: "1000000" })
        .where("id", "=", funded.accountId)
        .execute();
      const accounts = await stack.service.db
        .selectFrom("accounts")
        .select(["id", "plan", "balance_micro_usd"])
        .where("id", "in", [unfunded.accountId, funded.accountId])
        .execute();
      assert.ok(accounts.every((a) => a.plan === "payg"));
      const free = await planStatus(stack.url, ip, unfunded.key);
      assert.equal(free.status, 200);
      assert.equal(free.headers.get("x-ratelimit-limit"), "3", "Free's budget");
      const paid = await planStatus(stack.url, ip, funded.key);
      assert.equal(paid.status, 200);
      assert.equal(paid.headers.get("x-ratelimit-limit"), "6000", "pay-as-you-go's budget");
    });

    test("a plan upgrade raises the key's limit within the current window: the count so far stays", async () => {
      const ip = clientAddress();
      const key = await accountKey(stack.service.db, "free");
      let sent = 0;
      const call = async () => {
        sent++;
        return planStatus(stack.url, ip, key.key);
      };
      for (let i = 0; i < 3; i++) assert.equal((await call()).status, 200);
      const over = await call();
      assert.equal(over.status, 429);
      assert.equal(((await over.json()) as Envelope).plan, "free");

      await setAccountPlan(stack.service.db, key.accountId, "starter");
      // The replica applies the plan of its cached key lookup: at once where
      // the change is announced, within the cache's few seconds otherwise.
      const served = await until("the upgraded limit", async () => {
        const res = await call();
        return res.status === 200 ? res : undefined;
      });
      assert.equal(served.headers.get("x-ratelimit-limit"), "1000");
      assert.equal(
        served.headers.get("x-ratelimit-remaining"),
        String(1000 - sent),
        "the window was not restarted: every request so far still counts",
      );
      const status = (await served.json()) as { plan: string };
      assert.equal(status.plan, "starter");
    });
  });
}

describe("per-key rate limits when Redis cannot be reached", () => {
  let stack: TestStack;
  before(async () => {
    // A port nobody listens on.
    const port = await freePort();
    stack = await startStack({
      env: { ...LIMITS, RATE_LIMIT_PLAN_FREE: "1", REDIS_URL: `redis://127.0.0.1:${port}` },
    });
  });
  after(() => stack.stop());

  test("requests are served rather than refused", async () => {
    const ip = clientAddress();
    // Past both budgets (1 per key, 4 per address): none is counted, so all are served.
    for (let i = 0; i < 6; i++) {
      assert.equal((await planStatus(stack.url, ip, stack.apiKey)).status, 200);
      assert.equal(
        (await fetch(`${stack.url}/supported`, { headers: { "x-forwarded-for": ip } })).status,
        200,
      );
    }
  });
});

if (redisUrl && process.env["TEST_DATABASE_URL"]) {
  describe("per-key rate limits across two service instances (PostgreSQL + Redis)", () => {
    let devnet: Devnet;
    let database: OpenedDb & { url?: string };
    const instances: { service: Service; db: OpenedDb; url: string }[] = [];

    before(async () => {
      devnet = await startDevnet({ networks: ["eip155:8453"], blockTimeSeconds: 0, outFile: null });
      database = await openTestDb("postgres");
      const info = devnet.networks["eip155:8453"]!;
      for (let i = 0; i < 2; i++) {
        // Each instance with its own connection pool, as separate replicas have.
        const db = await openMigratedDb({ databaseUrl: database.url! });
        const service = await createService({
          overrides: { collectProcessMetrics: false, reconcile: false, webhooks: false },
          config: loadConfig({
            FACILITATOR_MODE: "devnet",
            HOST: "127.0.0.1",
            PORT: "0",
            LOG_LEVEL: "silent",
            DATABASE_URL: database.url!,
            REDIS_URL: redisUrl,
            ...LIMITS,
            RATE_LIMIT_PLAN_FREE: "4",
          }),
          database: db,
          chains: {
            eip155: {
              networks: [{ id: "eip155:8453", rpcUrls: [info.rpcUrl] }],
              privateKeys: info.facilitatorPrivateKeys as Hex[],
            },
          },
        });
        instances.push({ service, db, url: await service.listen() });
      }
    });
    after(async () => {
      for (const i of instances) {
        await i.service.close();
        await i.db.close();
      }
      await database?.close();
      await devnet?.stop();
    });

    test("one count per key: each instance alone has seen half the budget, both refuse past it", async () => {
      const key = await accountKey(database.db, "free");
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) {
        // Each request from an address of its own: only the key can be counted.
        const res = await planStatus(instances[i % 2]!.url, clientAddress(), key.key);
        statuses.push(res.status);
        if (res.status === 429) {
          assert.equal(((await res.json()) as Envelope).plan, "free");
          assert.ok(Number(res.headers.get("retry-after")) > 0);
        }
      }
      assert.deepEqual(statuses, [200, 200, 200, 200, 429, 429]);
    });

    test("a plan change is announced to every replica sharing the database, so none keeps the old limit", async () => {
      const key = await accountKey(database.db, "free");
      let notices = 0;
      const feed = listenForChanges(
        database.url,
        API_KEYS_CHANGED,
        () => notices++,
        createLogger("silent"),
      );
      try {
        // A listener reports its own (re)connection as a change: wait for it first.
        await until("the listener", async () => notices > 0);
        notices = 0;
        await setAccountPlan(database.db, key.accountId, "pro");
        await until("the plan change notice", async () => notices > 0);
        // Both instances now count the key against the pro plan's budget.
        for (const { url } of instances) {
          const res = await until("the new plan's budget", async () => {
            const r = await planStatus(url, clientAddress(), key.key);
            return r.headers.get("x-ratelimit-limit") === "20" ? r : undefined;
          });
          assert.equal(res.status, 200);
        }
      } finally {
        await feed.close();
      }
    });
  });
}
