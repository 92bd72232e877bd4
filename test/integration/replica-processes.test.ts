/**
 * The hosted-service rules across two service processes, the way an operator
 * scales past one machine: two `src/main.ts` processes in production mode
 * with the same signer keys, one PostgreSQL server and one Redis server.
 * Requests are split between the processes; the database (quota reservations,
 * payment-identifier claims, signer leases) and Redis (rate limits) are the
 * only things they share.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createPublicClient, http, type Hex } from "viem";
import { address } from "@solana/kit";
import { getTokenDecoder } from "@solana-program/token";
import {
  SOLANA_MAINNET,
  associatedTokenAccount,
  startSolanaLedger,
} from "../../devnet/svm/index.js";
import { privateKeyToAccount } from "viem/accounts";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { startDevnet, type Devnet } from "../../devnet/evm/index.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { monthOf } from "../../src/features/plans/plans.js";
import type { OpenedDb } from "../../src/storage/db.js";
import { openTestDb } from "../support/database.js";
import { requirementsFor, signPayment, usdcBalance } from "../chains/evm/payments.js";
import { onlyOneSuccess, post, settleAtOnce } from "../support/http.js";
import { solanaPaymentRequest } from "../chains/svm/payments.js";
import { freePort, until } from "../support/processes.js";

const PAY_TO = "0x5151515151515151515151515151515151515151" as Hex;
const AMOUNT = 1000n;
/** Per client address and window; the last test spends exactly this much. */
const RATE_LIMIT = 300;

const databaseUrl = process.env["TEST_DATABASE_URL"];
const redisUrl = process.env["TEST_REDIS_URL"];

/** A client address of its own per test, so budgets never mix across tests or runs. */
function clientAddress(): Record<string, string> {
  const [a, b] = randomBytes(2);
  return { "x-forwarded-for": `198.51.${a! % 250}.${(b! % 250) + 1}` };
}

describe(
  "hosted-service rules across two service processes (PostgreSQL + Redis)",
  // Skipped on a laptop without the servers; in CI a missing server fails the run.
  {
    skip:
      !(databaseUrl && redisUrl) &&
      !process.env["CI"] &&
      "needs TEST_DATABASE_URL and TEST_REDIS_URL",
  },
  () => {
    let devnet: Devnet;
    let db: OpenedDb & { url?: string };
    const processes: ChildProcess[] = [];
    let urls: [string, string];
    let rpcUrl: string;
    let usdc: Hex;
    let payerKeys: Hex[];
    let facilitatorKeys: Hex[];
    let solana: Awaited<ReturnType<typeof startSolanaLedger>>;

    const startReplica = async (keys: readonly Hex[]): Promise<string> => {
      const port = await freePort();
      const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
        env: {
          ...process.env,
          EVM_RPC_URLS_8453: rpcUrl,
          EVM_PRIVATE_KEYS: keys.join(","),
          SVM_RPC_URL: solana.info.rpcUrl,
          SVM_PRIVATE_KEYS: solana.info.facilitatorSecretKeys.join(","),
          DATABASE_URL: db.url!,
          REDIS_URL: redisUrl!,
          TRUST_PROXY: "true",
          RATE_LIMIT_MAX: String(RATE_LIMIT),
          RATE_LIMIT_WINDOW_MS: "600000",
          HOST: "127.0.0.1",
          PORT: String(port),
          LOG_LEVEL: "warn",
          SETTLE_TIMEOUT_MS: "20000",
        },
        stdio: ["ignore", "ignore", "inherit"],
      });
      processes.push(child);
      const url = `http://127.0.0.1:${port}`;
      // /health is not rate limited, so waiting costs no budget.
      await until("a service process", async () => (await fetch(`${url}/health`)).ok, 60_000);
      return url;
    };

    before(async () => {
      devnet = await startDevnet({
        blockTimeSeconds: 0,
        outFile: null,
        facilitators: 4,
        payers: 6,
      });
      db = await openTestDb("postgres");
      solana = await startSolanaLedger({ slotMs: 200 });
      const info = devnet.networks["eip155:8453"]!;
      rpcUrl = info.rpcUrl;
      usdc = info.assets["USDC"]! as Hex;
      payerKeys = info.payerPrivateKeys as Hex[];
      const keys = info.facilitatorPrivateKeys as Hex[];
      facilitatorKeys = keys;
      urls = (await Promise.all([startReplica(keys), startReplica(keys)])) as [string, string];
    });
    after(async () => {
      for (const p of processes) p.kill("SIGTERM");
      await Promise.all(
        processes.map((p) =>
          p.exitCode !== null ? undefined : new Promise((r) => p.once("exit", r)),
        ),
      );
      await db?.close();
      await devnet?.stop();
      await solana?.stop();
    });

    const requirements = (): PaymentRequirements =>
      requirementsFor({ network: "eip155:8453", usdc, payTo: PAY_TO, amount: String(AMOUNT) });
    const paidTo = () => usdcBalance(rpcUrl, usdc, PAY_TO);
    /** An account on the free plan (10 a month) that has used `used` units. */
    const freeAccount = async (name: string, used: number) => {
      const account = await createAccount(db.db, name);
      if (used > 0) {
        await db.db
          .insertInto("quota_usage")
          .values({ account_id: account.id, month: monthOf(new Date()), used })
          .execute();
      }
      const key = await createApiKey(db.db, account.id, name);
      return { accountId: account.id, apiKey: key.key };
    };
    const usage = (accountId: string) =>
      db.db
        .selectFrom("quota_usage")
        .select(["used", "reserved"])
        .where("account_id", "=", accountId)
        .where("month", "=", monthOf(new Date()))
        .executeTakeFirst();
    const settlementsOf = (accountId: string) =>
      db.db
        .selectFrom("settlements")
        .select(["status", "transaction"])
        .where("account_id", "=", accountId)
        .execute();

    test("one unit left: 50 parallel settles split over two processes give exactly one settlement and 49 × 402", async () => {
      const acc = await freeAccount("last-unit", 9);
      const headers = clientAddress();
      const before = await paidTo();
      const bodies = await Promise.all(
        Array.from({ length: 50 }, async (_, i) => {
          const r = requirements();
          return {
            x402Version: 2,
            paymentPayload: await signPayment(payerKeys[i % payerKeys.length]!, r),
            paymentRequirements: r,
          };
        }),
      );
      const responses = await Promise.all(
        bodies.map(async (b, i) => {
          const res = await post(urls[i % 2]!, "/settle", b, acc.apiKey, headers);
          return { status: res.status, json: (await res.json()) as Record<string, unknown> };
        }),
      );
      const ok = responses.filter((r) => r.status === 200);
      const refused = responses.filter((r) => r.status === 402);
      assert.equal(ok.length, 1, JSON.stringify(responses.map((r) => r.status)));
      assert.equal(ok[0]!.json["success"], true, JSON.stringify(ok[0]!.json));
      assert.equal(refused.length, 49);
      for (const r of refused) {
        assert.deepEqual(
          { ...r.json, message: undefined, requestId: undefined },
          {
            error: "quota_exceeded",
            plan: "free",
            limit: 10,
            usedThisMonth: 10,
            upgrade: "/api/billing/upgrade",
            message: undefined,
            requestId: undefined,
          },
        );
      }
      assert.equal(await paidTo(), before + AMOUNT, "exactly one transfer on-chain");
      assert.deepEqual(await usage(acc.accountId), { used: 10, reserved: 0 });
      const rows = await settlementsOf(acc.accountId);
      assert.deepEqual(
        rows.map((r) => [r.status, r.transaction]),
        [["succeeded", ok[0]!.json["transaction"]]],
      );
    });

    test("100 identical settles with one payment-identifier, split over two processes: one transfer, 100 identical bodies", async () => {
      const acc = await freeAccount("idempotent", 0);
      const headers = clientAddress();
      const payerKey = payerKeys[5]!;
      const payer = privateKeyToAccount(payerKey).address;
      const r = requirements();
      const payload = {
        ...(await signPayment(payerKey, r)),
        extensions: {
          "payment-identifier": { info: { required: false, id: "pay_two_processes_0001" } },
        },
      } as PaymentPayload;
      const body = { x402Version: 2, paymentPayload: payload, paymentRequirements: r };
      const [paidBefore, payerBefore] = await Promise.all([
        paidTo(),
        usdcBalance(rpcUrl, usdc, payer),
      ]);
      const responses = await Promise.all(
        Array.from({ length: 100 }, async (_, i) => {
          const res = await post(urls[i % 2]!, "/settle", body, acc.apiKey, headers);
          return { status: res.status, text: await res.text() };
        }),
      );
      assert.deepEqual([...new Set(responses.map((x) => x.status))], [200]);
      const texts = new Set(responses.map((x) => x.text));
      assert.equal(texts.size, 1, [...texts].join("\n"));
      const answer = JSON.parse(responses[0]!.text) as { success: boolean; transaction: string };
      assert.equal(answer.success, true);
      assert.equal(await paidTo(), paidBefore + AMOUNT, "exactly one transfer to payTo");
      assert.equal(await usdcBalance(rpcUrl, usdc, payer), payerBefore - AMOUNT);
      assert.deepEqual(
        (await settlementsOf(acc.accountId)).map((x) => [x.status, x.transaction]),
        [["succeeded", answer.transaction]],
      );
      assert.deepEqual(await usage(acc.accountId), { used: 1, reserved: 0 }, "one unit, once");
      const sent = await db.db
        .selectFrom("settlement_transactions")
        .innerJoin("settlements", "settlements.id", "settlement_transactions.settlement_id")
        .select("settlement_transactions.reference")
        .where("settlements.account_id", "=", acc.accountId)
        .execute();
      assert.equal(sent.length, 1, "one transaction was ever broadcast");
    });

    test("30 concurrent duplicates of one payment, no payment-identifier, over two processes: one transaction, one success, 29 duplicate_settlement", async () => {
      const acc = await freeAccount("duplicates", 0);
      const headers = clientAddress();
      const r = requirements();
      const body = {
        x402Version: 2,
        paymentPayload: await signPayment(payerKeys[4]!, r),
        paymentRequirements: r,
      };
      const client = createPublicClient({ transport: http(rpcUrl) });
      const signers = facilitatorKeys.map((k) => privateKeyToAccount(k).address);
      const nonces = async () =>
        (
          await Promise.all(
            signers.map((address) => client.getTransactionCount({ address, blockTag: "pending" })),
          )
        ).reduce((a, b) => a + b, 0);
      const [noncesBefore, paidBefore] = await Promise.all([nonces(), paidTo()]);
      const answers = await settleAtOnce(urls, body, acc.apiKey, 30, headers);
      onlyOneSuccess(answers, ["duplicate_settlement", "invalid_exact_evm_nonce_already_used"]);
      assert.equal(await nonces(), noncesBefore + 1, "the signers' nonces moved by exactly one");
      assert.equal(await paidTo(), paidBefore + AMOUNT, "one transfer");
      const rows = await db.db
        .selectFrom("settlements")
        .select(["status", "attempts"])
        .where("account_id", "=", acc.accountId)
        .execute();
      assert.deepEqual(
        rows.map((x) => [x.status, x.attempts]),
        [["succeeded", 30]],
      );
      assert.deepEqual(await usage(acc.accountId), { used: 1, reserved: 0 }, "billed once");
    });

    test("30 concurrent duplicates of one Solana payment over two processes: one transaction, one transfer, one success", async () => {
      const acc = await freeAccount("solana-duplicates", 0);
      const headers = clientAddress();
      const supported = (await (await fetch(`${urls[0]}/supported`, { headers })).json()) as {
        kinds: { network: string; extra?: Record<string, unknown> }[];
      };
      const feePayer = supported.kinds.find((k) => k.network === SOLANA_MAINNET)!.extra![
        "feePayer"
      ];
      const r = {
        scheme: "exact",
        network: SOLANA_MAINNET,
        asset: solana.info.assets.USDC,
        amount: "4321",
        payTo: solana.info.payTo,
        maxTimeoutSeconds: 60,
        extra: { feePayer },
      } as PaymentRequirements;
      const body = await solanaPaymentRequest(solana.info, 0, r);
      const paid = async () => {
        const acct = solana.ledger.account(await associatedTokenAccount(address(r.payTo)));
        return acct.exists ? getTokenDecoder().decode(acct.data).amount : 0n;
      };
      const before = await paid();
      const answers = await settleAtOnce(urls, body, acc.apiKey, 30, headers);
      onlyOneSuccess(answers);
      assert.equal(await paid(), before + 4321n, "one transfer");
      const sent = await db.db
        .selectFrom("settlement_transactions")
        .innerJoin("settlements", "settlements.id", "settlement_transactions.settlement_id")
        .select("settlement_transactions.reference")
        .where("settlements.account_id", "=", acc.accountId)
        .execute();
      assert.equal(sent.length, 1, "one transaction was ever sent");
    });

    test("rate limits are one budget per client address across both processes (Redis)", async () => {
      const headers = clientAddress();
      const statuses = await Promise.all(
        Array.from(
          { length: RATE_LIMIT },
          async (_, i) => (await fetch(`${urls[i % 2]!}/supported`, { headers })).status,
        ),
      );
      assert.deepEqual([...new Set(statuses)], [200], "the budget itself is served");
      // Each process alone has seen only half the budget: a 429 from both
      // proves they count together.
      for (const url of urls) {
        const res = await fetch(`${url}/supported`, { headers });
        assert.equal(res.status, 429, url);
        assert.ok(Number(res.headers.get("retry-after")) > 0);
        assert.equal(((await res.json()) as { error: string }).error, "rate_limited");
      }
    });
  },
);
