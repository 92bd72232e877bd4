/**
 * Replicas agree on billing: two service processes' database pools on one
 * PostgreSQL server apply the same payment at once (one applies it, the
 * other finds it applied) and sweep the same ended periods at once (each
 * account moves once, each "expiring" notice is written once). PostgreSQL
 * only: the embedded database is one process.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { openTestDb } from "../support/database.js";
import { openMigratedDb, type OpenedDb } from "../../src/storage/db.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { applyPayment, sweepBilling } from "../../src/features/billing/billingLedger.js";
import { BILLING_EVENT_TYPES } from "../../src/features/webhooks/billingEvents.js";

const SETTINGS = { paygGraceMicroUsd: 0 };
const DAY = 86_400_000;

describe("billing across replicas (postgres)", { skip: !process.env["TEST_DATABASE_URL"] }, () => {
  let a: OpenedDb & { url?: string };
  let b: OpenedDb;

  before(async () => {
    a = await openTestDb("postgres");
    b = await openMigratedDb({ databaseUrl: a.url!, poolSize: 5 });
  });
  after(async () => {
    await b?.close();
    await a?.close();
  });

  const withEndpoint = async (name: string) => {
    const account = await createAccount(a.db, name);
    await a.db
      .insertInto("webhook_endpoints")
      .values({
        account_id: account.id,
        url: "https://hooks.example/x",
        secret: "whsec_test",
        events: [...BILLING_EVENT_TYPES],
        updated_at: new Date(),
      })
      .execute();
    return account.id;
  };
  const events = async (accountId: string) =>
    (
      await a.db
        .selectFrom("webhook_events")
        .select("type")
        .where("account_id", "=", accountId)
        .orderBy("seq")
        .execute()
    ).map((e) => e.type);

  test("the same payment applied by two replicas at once is applied once", async () => {
    const accounts = await Promise.all(
      Array.from({ length: 10 }, (_, i) => withEndpoint(`race-${i}`)),
    );
    const now = new Date();
    for (const accountId of accounts) {
      const id = randomUUID();
      await a.db
        .insertInto("billing_payments")
        .values({
          id,
          account_id: accountId,
          kind: "plan",
          plan: "pro",
          amount_micro_usd: 49_000_000,
          status: "pending",
          source: "api_key",
          authorization_key: `eip155:8453:race:${id}`,
        })
        .execute();
      const settled = { transaction: "0x01", payer: null };
      const results = await Promise.all([
        applyPayment(a.db, id, settled, SETTINGS, now),
        applyPayment(b.db, id, settled, SETTINGS, now),
      ]);
      assert.deepEqual(results.map((r) => r.applied).sort(), [false, true]);
      const row = await b.db
        .selectFrom("accounts")
        .select(["plan", "paid_until"])
        .where("id", "=", accountId)
        .executeTakeFirstOrThrow();
      assert.equal(row.plan, "pro");
      assert.deepEqual(row.paid_until, new Date(now.getTime() + 30 * DAY), "one period, not two");
      assert.deepEqual(await events(accountId), ["billing.payment_received"]);
    }
  });

  test("two replicas sweeping at once move each ended period once and notice each ending once", async () => {
    const now = new Date();
    const ended = await Promise.all(Array.from({ length: 20 }, (_, i) => withEndpoint(`end-${i}`)));
    const ending = await Promise.all(
      Array.from({ length: 20 }, (_, i) => withEndpoint(`soon-${i}`)),
    );
    await a.db
      .updateTable("accounts")
      .set({ plan: "starter", paid_until: new Date(now.getTime() - 1000), next_plan: "payg" })
      .where("id", "in", ended)
      .execute();
    await a.db
      .updateTable("accounts")
      .set({ plan: "max", paid_until: new Date(now.getTime() + 3 * DAY) })
      .where("id", "in", ending)
      .execute();
    const [x, y] = await Promise.all([
      sweepBilling(a.db, SETTINGS, now),
      sweepBilling(b.db, SETTINGS, now),
    ]);
    assert.equal(x.expired + y.expired, 20, "each ended period moved once");
    assert.equal(x.noticed + y.noticed, 20, "each ending noticed once");
    const rows = await a.db
      .selectFrom("accounts")
      .select(["plan", "paid_until", "next_plan"])
      .where("id", "in", ended)
      .execute();
    assert.ok(
      rows.every((r) => r.plan === "payg" && r.paid_until === null && r.next_plan === null),
    );
    for (const id of ending) assert.deepEqual(await events(id), ["billing.plan_expiring"]);
  });
});
