/**
 * The quota ledger on its own (no HTTP): reservations never overshoot the
 * hard limit, a release gives units back, a charge in a transaction bills
 * exactly once, pay-as-you-go accrues charges past its free allowance (and is
 * held to Free's failure limit while it holds no prepaid balance), a
 * success a reorg took back is not paid for, and a suspended account is
 * refused.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { openMigratedDb, type OpenedDb } from "../../storage/db.js";
import { createAccount } from "../accounts/accounts.js";
import { QuotaLedger, setAccountPlan, setAccountSuspended } from "./quotaLedger.js";
import { PAYG_FREE_UNITS, monthOf } from "./plans.js";
import { ServiceError } from "../../lib/errors.js";
import { randomUUID } from "node:crypto";
import { createApiKey } from "../keys/apiKeys.js";
import { succeededRow } from "../../../test/support/recorder.js";

const LIMITS = { starterLimit: 3, proLimit: 100, maxLimit: 1000 };

describe("quota ledger", () => {
  let database: OpenedDb;
  let ledger: QuotaLedger;
  before(async () => {
    database = await openMigratedDb({ dataDir: "memory://" });
    ledger = new QuotaLedger(database.db, LIMITS);
  });
  after(() => database.close());

  const usage = async (accountId: string) =>
    database.db
      .selectFrom("quota_usage")
      .select(["used", "reserved"])
      .where("account_id", "=", accountId)
      .where("month", "=", monthOf(new Date()))
      .executeTakeFirstOrThrow();

  test("concurrent reservations stop exactly at the hard limit", async () => {
    const account = await createAccount(database.db, "starter");
    await setAccountPlan(database.db, account.id, "starter");
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, () => ledger.reserve(account.id, 1, "eip155:8453")),
    );
    const granted = results.filter((r) => r.status === "fulfilled");
    const refused = results.filter((r) => r.status === "rejected");
    assert.equal(granted.length, 3);
    assert.ok(
      refused.every((r) => r.reason instanceof ServiceError && r.reason.code === "quota_exceeded"),
    );
    assert.deepEqual(await usage(account.id), { used: 0, reserved: 3 });
  });

  test("release gives units back; commit turns them into usage", async () => {
    const account = await createAccount(database.db, "release");
    await setAccountPlan(database.db, account.id, "starter");
    const a = await ledger.reserve(account.id, 1, "eip155:8453");
    const b = await ledger.reserve(account.id, 1, "eip155:8453");
    await ledger.release(a);
    await ledger.commit(b, null);
    assert.deepEqual(await usage(account.id), { used: 1, reserved: 0 });
  });

  test("a charge in the caller's transaction counts once per call and reads the plan then", async () => {
    const account = await createAccount(database.db, "charge");
    await database.db.transaction().execute((trx) => ledger.chargeIn(trx, account.id, 2, null));
    assert.deepEqual(await usage(account.id), { used: 2, reserved: 0 });
    // A transaction that rolls back charges nothing.
    await assert.rejects(
      database.db.transaction().execute(async (trx) => {
        await ledger.chargeIn(trx, account.id, 5, null);
        throw new Error("rolled back");
      }),
    );
    assert.deepEqual(await usage(account.id), { used: 2, reserved: 0 });
  });

  test("pay-as-you-go without a balance keeps Free's cap on settles in flight; with one, it is lifted", async () => {
    const account = await createAccount(database.db, "payg-unfunded");
    await setAccountPlan(database.db, account.id, "payg");
    const held = await Promise.allSettled(
      Array.from({ length: 12 }, () => ledger.reserve(account.id, 1, "eip155:8453")),
    );
    const granted = held.filter((r) => r.status === "fulfilled");
    const refused = held.filter((r) => r.status === "rejected");
    assert.equal(granted.length, 10, "Free's ten in flight");
    assert.equal(refused.length, 2);
    assert.match(
      String((refused[0] as PromiseRejectedResult).reason),
      /at most 10 settlements running at once/,
    );
    await database.db
      .updateTable("accounts")
      .set({ balance_micro_usd: "1000000" })
      .where("id", "=", account.id)
      .execute();
    await ledger.reserve(account.id, 1, "eip155:8453");
    assert.deepEqual(await usage(account.id), { used: 0, reserved: 11 });
  });

  test("pay-as-you-go bills only units past the free allowance", async () => {
    const account = await createAccount(database.db, "payg");
    await setAccountPlan(database.db, account.id, "payg");
    await database.db
      .insertInto("quota_usage")
      .values({ account_id: account.id, month: monthOf(new Date()), used: PAYG_FREE_UNITS - 1 })
      .execute();
    await database.db.transaction().execute((trx) => ledger.chargeIn(trx, account.id, 3, null));
    const charges = await database.db
      .selectFrom("usage_charges")
      .select(["units", "amount_micro_usd"])
      .where("account_id", "=", account.id)
      .execute();
    assert.deepEqual(
      charges.map((c) => [c.units, Number(c.amount_micro_usd)]),
      [[2, 2000]],
    );
  });

  test("a revoked success gives back its units and its pay-as-you-go charge, and lifts the suspension that charge made", async () => {
    const account = await createAccount(database.db, "payg-revoked");
    await setAccountPlan(database.db, account.id, "payg");
    const key = await createApiKey(database.db, account.id, "k");
    await database.db
      .insertInto("webhook_endpoints")
      .values({
        account_id: account.id,
        url: "https://hooks.example/x",
        secret: "whsec_test",
        events: ["billing.account_suspended", "billing.suspension_lifted"],
        updated_at: new Date(),
      })
      .execute();
    await database.db
      .insertInto("quota_usage")
      .values({ account_id: account.id, month: monthOf(new Date()), used: PAYG_FREE_UNITS })
      .execute();
    await database.db
      .updateTable("accounts")
      .set({ balance_micro_usd: "500" })
      .where("id", "=", account.id)
      .execute();
    const settlement = {
      id: randomUUID(),
      account_id: account.id,
      units: 2,
      finished_at: new Date(),
    };
    await database.db
      .insertInto("settlements")
      .values(succeededRow({ ...settlement, api_key_id: key.id }))
      .execute();
    await database.db
      .transaction()
      .execute((trx) => ledger.chargeIn(trx, account.id, 2, settlement.id));
    const account_ = async () => {
      const a = await database.db
        .selectFrom("accounts")
        .select(["balance_micro_usd", "suspended_by"])
        .where("id", "=", account.id)
        .executeTakeFirstOrThrow();
      return { balance_micro_usd: String(a.balance_micro_usd), suspended_by: a.suspended_by };
    };
    assert.deepEqual(await account_(), { balance_micro_usd: "-1500", suspended_by: "billing" });

    await database.db.transaction().execute((trx) => ledger.revokeChargeIn(trx, settlement));
    assert.deepEqual(await account_(), { balance_micro_usd: "500", suspended_by: null });
    assert.deepEqual(await usage(account.id), { used: PAYG_FREE_UNITS, reserved: 0 });
    const left = await database.db
      .selectFrom("usage_charges")
      .select("id")
      .where("settlement_id", "=", settlement.id)
      .execute();
    assert.deepEqual(left, [], "the charge is gone");
    const events = await database.db
      .selectFrom("webhook_events")
      .select("type")
      .where("account_id", "=", account.id)
      .orderBy("seq")
      .execute();
    assert.deepEqual(
      events.map((e) => e.type),
      ["billing.account_suspended", "billing.suspension_lifted"],
    );
  });

  test("a suspended account is refused with account_suspended", async () => {
    const account = await createAccount(database.db, "suspended");
    await setAccountSuspended(database.db, account.id, true);
    await assert.rejects(ledger.reserve(account.id, 1, "eip155:8453"), (e: unknown) => {
      return e instanceof ServiceError && e.code === "account_suspended";
    });
  });

  test("pay-as-you-go without a positive balance has Free's failure limit; a balance lifts it", async () => {
    const strict = new QuotaLedger(database.db, {
      ...LIMITS,
      failuresPerHour: { free: 2, paid: 50 },
    });
    const refusedWith = (code: string) => (e: unknown) =>
      e instanceof ServiceError && e.code === code;
    const setBalance = (id: string, micro: string) =>
      database.db
        .updateTable("accounts")
        .set({ balance_micro_usd: micro })
        .where("id", "=", id)
        .execute();

    // Two failures of its own in the hour: Free's limit, until it is funded.
    const failing = await createAccount(database.db, "payg-failing");
    await setAccountPlan(database.db, failing.id, "payg");
    const key = await createApiKey(database.db, failing.id, "k");
    const now = new Date();
    for (let i = 0; i < 2; i++) {
      await database.db
        .insertInto("settlements")
        .values({
          id: randomUUID(),
          account_id: failing.id,
          api_key_id: key.id,
          network: "eip155:8453",
          scheme: "exact",
          payer: "0x1111111111111111111111111111111111111111",
          pay_to: "0x7e45000000000000000000000000000000007e45",
          asset: "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913",
          amount: "1",
          payload_fingerprint: `f${i}`,
          status: "failed",
          transaction: `0x${String(i).repeat(64)}`,
          error_reason: "transaction_reverted",
          error_message: null,
          started_at: now,
          finished_at: now,
          duration_ms: 1,
          request: null,
          authorization_key: `test:${randomUUID()}`,
        })
        .execute();
    }
    await assert.rejects(
      strict.reserve(failing.id, 1, "eip155:8453"),
      refusedWith("too_many_failed_settlements"),
    );
    await setBalance(failing.id, "-5");
    await assert.rejects(
      strict.reserve(failing.id, 1, "eip155:8453"),
      refusedWith("too_many_failed_settlements"),
    );
    await setBalance(failing.id, "1");
    await strict.reserve(failing.id, 1, "eip155:8453");
    assert.deepEqual(await usage(failing.id), { used: 0, reserved: 1 });
  });
});
