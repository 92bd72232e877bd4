/**
 * Two replicas with the same key set on one PostgreSQL server: each leases
 * a fair share of the accounts, so they never use one account's nonces at
 * once; when one dies (SIGKILL) the other takes its accounts within seconds.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import type { Hex } from "viem";
import { startDevnet, type Devnet } from "../../devnet/evm/index.js";
import { createService, type Service } from "../../src/app.js";
import { loadConfig } from "../../src/config/index.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { setAccountPlan } from "../../src/features/plans/quotaLedger.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { openTestDb } from "../support/database.js";
import { freePort, until } from "../support/processes.js";
import { requirementsFor, signPayment } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import type { OpenedDb } from "../../src/storage/db.js";

const PAY_TO = "0x8888888888888888888888888888888888888888" as Hex;

describe(
  "signer leases across replicas",
  // Skipped on a laptop without PostgreSQL; in CI a missing server fails the run.
  { skip: !process.env["TEST_DATABASE_URL"] && !process.env["CI"] && "needs TEST_DATABASE_URL" },
  () => {
    let devnet: Devnet;
    let db: OpenedDb & { url?: string };
    let replicaA: ChildProcess | undefined;
    let serviceB: Service;

    before(async () => {
      devnet = await startDevnet({ blockTimeSeconds: 0, outFile: null, facilitators: 4 });
      db = await openTestDb("postgres");
    });
    after(async () => {
      replicaA?.kill("SIGKILL");
      await serviceB?.close();
      await db.close();
      await devnet.stop();
    });

    test("each replica holds a share; settles through both never share an account; a killed replica's share moves", async () => {
      const info = devnet.networks["eip155:8453"]!;
      const keys = info.facilitatorPrivateKeys as Hex[];
      const account = await createAccount(db.db, "replicas");
      // Replica A runs in production mode, where quotas apply: room for every settle.
      await setAccountPlan(db.db, account.id, "max");
      const key = await createApiKey(db.db, account.id, "replicas");
      const portA = await freePort();
      const urlA = `http://127.0.0.1:${portA}`;
      replicaA = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
        env: {
          ...process.env,
          EVM_RPC_URLS_8453: info.rpcUrl,
          EVM_PRIVATE_KEYS: keys.join(","),
          DATABASE_URL: db.url!,
          // Production with another replica on the same database needs Redis.
          ...(process.env["TEST_REDIS_URL"] ? { REDIS_URL: process.env["TEST_REDIS_URL"] } : {}),
          HOST: "127.0.0.1",
          PORT: String(portA),
          LOG_LEVEL: "warn",
        },
        stdio: ["ignore", "ignore", "inherit"],
      });
      await until("replica A", async () => (await fetch(`${urlA}/health`)).ok);

      serviceB = await createService({
        overrides: { collectProcessMetrics: false, pollingIntervalMs: 50 },
        config: loadConfig({
          FACILITATOR_MODE: "devnet",
          PORT: "0",
          HOST: "127.0.0.1",
          LOG_LEVEL: "silent",
        }),
        database: db,
        chains: {
          eip155: { networks: [{ id: "eip155:8453", rpcUrls: [info.rpcUrl] }], privateKeys: keys },
        },
      });
      const urlB = await serviceB.listen();

      const holders = async () => {
        const rows = await db.db
          .selectFrom("signer_leases")
          .select(["holder", "address"])
          .where("expires_at", ">", new Date())
          .execute();
        const by = new Map<string, string[]>();
        for (const r of rows) by.set(r.holder, [...(by.get(r.holder) ?? []), r.address]);
        return by;
      };
      const split = await until("a 2 + 2 split of the accounts", async () => {
        const by = await holders();
        const sizes = [...by.values()].map((v) => v.length).sort();
        return by.size === 2 && sizes[0] === 2 && sizes[1] === 2 ? by : undefined;
      });
      const all = [...split.values()].flat();
      assert.equal(new Set(all).size, 4, "no account is leased twice");

      const requirements = requirementsFor({
        network: "eip155:8453",
        usdc: info.assets["USDC"]!,
        payTo: PAY_TO,
        amount: "100",
      });
      const settleVia = async (url: string, i: number) => {
        const body = {
          x402Version: 2,
          paymentPayload: await signPayment(
            info.payerPrivateKeys[i % info.payerPrivateKeys.length] as Hex,
            requirements,
          ),
          paymentRequirements: requirements,
        };
        return (await (await post(url, "/settle", body, key.key)).json()) as {
          success: boolean;
          transaction: string;
        };
      };
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          settleVia(i % 2 === 0 ? urlA : urlB, i).then((r) => ({ r, via: i % 2 })),
        ),
      );
      assert.ok(
        results.every(({ r }) => r.success),
        JSON.stringify(results.filter(({ r }) => !r.success)),
      );
      const signerOf = async (hash: string) =>
        (
          await db.db
            .selectFrom("settlement_transactions")
            .select("signer")
            .where("reference", "=", hash)
            .executeTakeFirstOrThrow()
        ).signer;
      const usedA = new Set(
        await Promise.all(results.filter((x) => x.via === 0).map((x) => signerOf(x.r.transaction))),
      );
      const usedB = new Set(
        await Promise.all(results.filter((x) => x.via === 1).map((x) => signerOf(x.r.transaction))),
      );
      assert.deepEqual(
        [...usedA].filter((a) => usedB.has(a)),
        [],
        "the replicas never used the same account",
      );

      replicaA.kill("SIGKILL");
      replicaA = undefined;
      await until(
        "replica B to hold all four accounts",
        async () => {
          const by = await holders();
          return by.size === 1 && [...by.values()][0]!.length === 4;
        },
        20_000,
      );
      const after = await Promise.all(
        Array.from({ length: 8 }, (_, i) => settleVia(urlB, 100 + i)),
      );
      assert.ok(after.every((r) => r.success));
      const usedAfter = new Set(await Promise.all(after.map((r) => signerOf(r.transaction))));
      assert.ok(
        [...usedAfter].some((a) => usedA.has(a)),
        "B now uses the dead replica's accounts",
      );
    });
  },
);
