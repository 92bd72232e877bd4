/**
 * A network whose chain was replaced (a devnet restarted fresh, an RPC moved
 * to another chain) is said so, once, and records from before are not
 * reconciled against the new chain: they stay pending rather than be
 * rewritten as failed by a chain that never saw them.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createLogger } from "../../src/lib/logger.js";
import { checkChainIdentity } from "../../src/features/settlements/chainIdentities.js";
import { SettlementRecorder } from "../../src/features/settlements/settlementRecorder.js";
import { SettlementReconciler } from "../../src/workers/settlementReconciler.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import type { PaymentRequest } from "../../src/protocol/index.js";
import { availableBackends, openTestDb } from "../support/database.js";
import type { OpenedDb } from "../../src/storage/db.js";

for (const backend of availableBackends()) {
  describe(`chain identity (${backend})`, () => {
    let database: OpenedDb;
    before(async () => {
      database = await openTestDb(backend);
    });
    after(() => database.close());

    test("first sighting, same chain, replaced chain", async () => {
      const first = await checkChainIdentity(database.db, "eip155:1", "0xaaa");
      assert.deepEqual([first.replaced, first.since.getTime()], [false, 0]);
      const same = await checkChainIdentity(database.db, "eip155:1", "0xaaa");
      assert.equal(same.replaced, false);
      const other = await checkChainIdentity(database.db, "eip155:1", "0xbbb");
      assert.equal(other.replaced, true);
      assert.equal(other.previous, "0xaaa");
      assert.ok(other.since.getTime() > Date.now() - 60_000);
      const again = await checkChainIdentity(database.db, "eip155:1", "0xbbb");
      assert.deepEqual([again.replaced, again.since.getTime()], [false, other.since.getTime()]);
    });

    test("the reconciler leaves rows from a replaced chain pending, and decides the others", async () => {
      const db = database.db;
      const log = createLogger("silent");
      const recorder = new SettlementRecorder(db, log);
      const account = await createAccount(db, "chains");
      const key = await createApiKey(db, account.id, "chains");
      const principal = { accountId: account.id, keyId: key.id, keyName: key.name };
      const request = (network: string) =>
        ({
          x402Version: 2,
          paymentPayload: { x402Version: 2, payload: { n: network } },
          paymentRequirements: {
            scheme: "exact",
            network,
            asset: "0x2222222222222222222222222222222222222222",
            amount: "1",
            payTo: "0x3333333333333333333333333333333333333333",
          },
        }) as unknown as PaymentRequest;
      const old = (await recorder.begin({
        principal,
        request: request("eip155:10"),
        authorizationKey: "chains:old",
        payer: undefined,
        units: 1,
      }))!;
      const kept = (await recorder.begin({
        principal,
        request: request("eip155:8453"),
        authorizationKey: "chains:kept",
        payer: undefined,
        units: 1,
      }))!;
      // Both rows are older than the reconciler's threshold.
      await db
        .updateTable("settlements")
        .set({ started_at: new Date(Date.now() - 60_000) })
        .where("id", "in", [old, kept])
        .execute();
      const asked: string[] = [];
      const reconciler = new SettlementReconciler({
        recorder,
        log,
        olderThanMs: 0,
        reconcile: async (p) => {
          asked.push(p.network);
          return { status: "failed", reason: "settlement_interrupted", message: "gone" };
        },
        chainSince: (network) => (network === "eip155:10" ? new Date() : new Date(0)),
      });
      assert.equal(await reconciler.runOnce(), 1);
      assert.deepEqual(asked, ["eip155:8453"], "the replaced chain was never asked");
      const status = async (id: string) =>
        (
          await db
            .selectFrom("settlements")
            .select("status")
            .where("id", "=", id)
            .executeTakeFirstOrThrow()
        ).status;
      assert.equal(await status(old), "pending");
      assert.equal(await status(kept), "failed");
    });
  });
}
