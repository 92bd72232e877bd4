/**
 * Billing's rules and writes on their own (no chain, no HTTP): who may buy
 * what, a payment applied exactly once with its plan change, renewals that
 * extend, a lower plan that waits for the period's end, a chosen downgrade
 * at the end, the "expiring" notice written once, expiry back to Free (or
 * pay-as-you-go), a top-up that lifts a balance suspension, and a payment
 * left pending by a request that died, applied by the sweep once its
 * settlement is recorded.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { openMigratedDb, type OpenedDb } from "../../storage/db.js";
import { createAccount } from "../accounts/accounts.js";
import { createApiKey } from "../keys/apiKeys.js";
import { ServiceError } from "../../lib/errors.js";
import { DEFAULT_PLAN_PRICES } from "../plans/plans.js";
import { BILLING_ACCOUNT_ID, BILLING_KEY_ID, ensureBillingAccount } from "./billingAccount.js";
import {
  applyPayment,
  beginPayment,
  cancelPlanChange,
  choosePlanChange,
  compPlan,
  failPayment,
  listBillingHistory,
  billingHistoryCsv,
  nextMonthStart,
  readAccountBilling,
  sweepBilling,
} from "./billingLedger.js";
import { priceOrder, readOrder, type AccountBilling, type Order } from "./orders.js";

const DAY = 86_400_000;
const LIMITS = { prices: DEFAULT_PLAN_PRICES, topUpMinMicroUsd: 1_000_000 };
const SETTINGS = { paygGraceMicroUsd: 0 };

const fresh = (over: Partial<AccountBilling> = {}): AccountBilling => ({
  plan: "free",
  paidUntil: null,
  nextPlan: null,
  nextPlanDays: null,
  balanceMicroUsd: 0n,
  suspended: false,
  suspendedBy: null,
  ...over,
});

const refusal = (f: () => unknown, code: string) =>
  assert.throws(f, (e: unknown) => e instanceof ServiceError && e.code === code);

describe("billing orders", () => {
  const now = new Date("2026-11-14T10:00:00Z");

  test("an API key only buys: up, a renewal, a top-up; never down nor away from pay-as-you-go", () => {
    const pro = fresh({ plan: "pro", paidUntil: new Date(now.getTime() + 10 * DAY) });
    refusal(
      () => priceOrder(pro, { kind: "plan", plan: "starter" }, "api_key", LIMITS, now),
      "forbidden",
    );
    assert.equal(
      priceOrder(pro, { kind: "plan", plan: "pro" }, "api_key", LIMITS, now).effect,
      "renew",
    );
    assert.equal(
      priceOrder(pro, { kind: "plan", plan: "max" }, "api_key", LIMITS, now).effect,
      "now",
    );
    const payg = fresh({ plan: "payg" });
    for (const plan of ["starter", "pro", "max"] as const) {
      refusal(() => priceOrder(payg, { kind: "plan", plan }, "api_key", LIMITS, now), "forbidden");
    }
    const topUp = priceOrder(
      payg,
      { kind: "top_up", amountMicroUsd: 2_500_000 },
      "api_key",
      LIMITS,
      now,
    );
    assert.equal(topUp.priceMicroUsd, 2_500_000);
    refusal(
      () => priceOrder(payg, { kind: "top_up", amountMicroUsd: 999_999 }, "api_key", LIMITS, now),
      "invalid_request",
    );
  });

  test("a person may buy a lower plan: it is paid now and starts when the current period ends", () => {
    const end = new Date(now.getTime() + 10 * DAY);
    const p = priceOrder(
      fresh({ plan: "max", paidUntil: end }),
      { kind: "plan", plan: "starter" },
      "dashboard",
      LIMITS,
      now,
    );
    assert.equal(p.effect, "queued");
    assert.deepEqual(p.periodStart, end);
    assert.deepEqual(p.periodEnd, new Date(end.getTime() + 30 * DAY));
    assert.equal(p.priceMicroUsd, 5_000_000);
    // While a paid change already waits, another lower plan is refused: it
    // would otherwise cut the running period short.
    refusal(
      () =>
        priceOrder(
          fresh({ plan: "max", paidUntil: end, nextPlan: "pro", nextPlanDays: 30 }),
          { kind: "plan", plan: "starter" },
          "dashboard",
          LIMITS,
          now,
        ),
      "conflict",
    );
    // A renewal extends from the end, not from now.
    const r = priceOrder(
      fresh({ plan: "max", paidUntil: end }),
      { kind: "plan", plan: "max" },
      "dashboard",
      LIMITS,
      now,
    );
    assert.deepEqual(r.periodEnd, new Date(end.getTime() + 30 * DAY));
    // An open-ended comp has nothing to renew.
    refusal(
      () =>
        priceOrder(fresh({ plan: "pro" }), { kind: "plan", plan: "pro" }, "dashboard", LIMITS, now),
      "conflict",
    );
  });

  test("orders read from a body: a paid plan or a top-up in USD, nothing else", () => {
    assert.deepEqual(readOrder({ plan: "pro" }), { kind: "plan", plan: "pro" } satisfies Order);
    assert.deepEqual(readOrder({ topUpUsd: "2.5" }), { kind: "top_up", amountMicroUsd: 2_500_000 });
    assert.deepEqual(readOrder({ topUpUsd: 0.002 }), { kind: "top_up", amountMicroUsd: 2000 });
    for (const bad of [
      {},
      { plan: "free" },
      { plan: "payg" },
      { topUpUsd: "1e3" },
      { plan: "pro", topUpUsd: "1" },
    ]) {
      refusal(() => readOrder(bad), "invalid_request");
    }
  });
});

describe("billing ledger", () => {
  let database: OpenedDb;
  before(async () => {
    database = await openMigratedDb({ dataDir: "memory://" });
    await ensureBillingAccount(database.db);
  });
  after(() => database.close());

  const db = () => database.db;
  /** A pending payment as the checkout writes it before settling. */
  const pending = async (accountId: string, order: Order, now: Date) => {
    const account = await readAccountBilling(db(), accountId);
    const purchase = priceOrder(account, order, "dashboard", LIMITS, now);
    const { row } = await beginPayment(
      db(),
      {
        accountId,
        purchase,
        source: "dashboard",
        details: {
          authorizationKey: `eip155:8453:test:${randomUUID()}`,
          network: "eip155:8453",
          asset: "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913",
          payTo: "0x7e45000000000000000000000000000000007e45",
          payer: "0x1111111111111111111111111111111111111111",
        },
      },
      now,
    );
    return row;
  };
  const pay = async (accountId: string, order: Order, now: Date) => {
    const row = await pending(accountId, order, now);
    return applyPayment(
      db(),
      row.id,
      { transaction: `0x${"ab".repeat(32)}`, payer: null },
      SETTINGS,
      now,
    );
  };
  const events = async (accountId: string) =>
    (
      await db()
        .selectFrom("webhook_events")
        .select("type")
        .where("account_id", "=", accountId)
        .orderBy("seq")
        .execute()
    ).map((e) => e.type);
  const withEndpoint = async (name: string) => {
    const account = await createAccount(db(), name);
    await db()
      .insertInto("webhook_endpoints")
      .values({
        account_id: account.id,
        url: "https://hooks.example/x",
        secret: "whsec_test",
        events: [
          "billing.payment_received",
          "billing.plan_renewed",
          "billing.plan_expiring",
          "billing.account_suspended",
          "billing.suspension_lifted",
        ],
        updated_at: new Date(),
      })
      .execute();
    return account.id;
  };

  test("a payment is applied once: the plan changes with its record; applying it again changes nothing", async () => {
    const id = await withEndpoint("once");
    const now = new Date();
    const row = await pending(id, { kind: "plan", plan: "starter" }, now);
    assert.equal((await readAccountBilling(db(), id)).plan, "free", "recorded, not applied yet");
    const first = await applyPayment(
      db(),
      row.id,
      { transaction: "0x01", payer: null },
      SETTINGS,
      now,
    );
    const second = await applyPayment(
      db(),
      row.id,
      { transaction: "0x01", payer: null },
      SETTINGS,
      now,
    );
    assert.equal(first.applied, true);
    assert.equal(second.applied, false);
    const account = await readAccountBilling(db(), id);
    assert.equal(account.plan, "starter");
    assert.deepEqual(account.paidUntil, new Date(now.getTime() + 30 * DAY));
    assert.deepEqual(await events(id), ["billing.payment_received"]);
  });

  test("a row the sweep gave up on is still applied when its request's settle succeeds: money that arrived is never dropped", async () => {
    const id = await withEndpoint("late");
    const now = new Date();
    const row = await pending(id, { kind: "plan", plan: "starter" }, now);
    await failPayment(db(), row.id, "the payment was never settled");
    const applied = await applyPayment(
      db(),
      row.id,
      { transaction: "0x02", payer: null },
      SETTINGS,
      now,
    );
    assert.equal(applied.applied, true);
    assert.equal(applied.row.status, "paid");
    assert.equal(applied.row.error, null);
    assert.equal((await readAccountBilling(db(), id)).plan, "starter");
  });

  test("a renewal extends the period from its end and says so; an upgrade starts now", async () => {
    const id = await withEndpoint("renew");
    const t0 = new Date("2026-11-01T00:00:00Z");
    await pay(id, { kind: "plan", plan: "starter" }, t0);
    await pay(id, { kind: "plan", plan: "starter" }, new Date(t0.getTime() + 5 * DAY));
    assert.deepEqual(
      (await readAccountBilling(db(), id)).paidUntil,
      new Date(t0.getTime() + 60 * DAY),
    );
    const t1 = new Date(t0.getTime() + 6 * DAY);
    await pay(id, { kind: "plan", plan: "pro" }, t1);
    const account = await readAccountBilling(db(), id);
    assert.equal(account.plan, "pro");
    assert.deepEqual(account.paidUntil, new Date(t1.getTime() + 30 * DAY));
    assert.deepEqual(await events(id), [
      "billing.payment_received",
      "billing.payment_received",
      "billing.plan_renewed",
      "billing.payment_received",
    ]);
  });

  test("7 days before the end: one expiring notice; at the end: the lower plan paid in advance, then Free", async () => {
    const id = await withEndpoint("expiry");
    const t0 = new Date("2026-10-01T00:00:00Z");
    await pay(id, { kind: "plan", plan: "max" }, t0);
    const end = new Date(t0.getTime() + 30 * DAY);
    // A person buys Starter for after Max: paid now, waiting.
    await pay(id, { kind: "plan", plan: "starter" }, new Date(t0.getTime() + DAY));
    let account = await readAccountBilling(db(), id);
    assert.equal(account.plan, "max");
    assert.equal(account.nextPlan, "starter");
    assert.equal(account.nextPlanDays, 30);
    // Something paid waits: no "expiring" notice for Max.
    await sweepBilling(db(), SETTINGS, new Date(end.getTime() - 6 * DAY));
    assert.ok(!(await events(id)).includes("billing.plan_expiring"));
    await sweepBilling(db(), SETTINGS, new Date(end.getTime() + 1));
    account = await readAccountBilling(db(), id);
    assert.equal(account.plan, "starter");
    assert.deepEqual(account.paidUntil, new Date(end.getTime() + 30 * DAY));
    assert.equal(account.nextPlan, null);
    // Starter has nothing after it: one notice, however many sweeps (replicas) run.
    const starterEnd = account.paidUntil!;
    for (let i = 0; i < 3; i++)
      await sweepBilling(db(), SETTINGS, new Date(starterEnd.getTime() - 7 * DAY + 1));
    assert.equal((await events(id)).filter((e) => e === "billing.plan_expiring").length, 1);
    await sweepBilling(db(), SETTINGS, starterEnd);
    account = await readAccountBilling(db(), id);
    assert.equal(account.plan, "free");
    assert.equal(account.paidUntil, null);
  });

  const conflict = async (p: Promise<unknown>) =>
    assert.rejects(p, (e: unknown) => e instanceof ServiceError && e.code === "conflict");
  const planRows = async (accountId: string) =>
    db()
      .selectFrom("billing_payments")
      .select(["plan", "status", "period_start", "period_end"])
      .where("account_id", "=", accountId)
      .orderBy("created_at")
      .execute();

  test("two lower plans paid in advance that raced: the first is written, the other refused before it is settled", async () => {
    for (const [first, second] of [
      ["starter", "pro"],
      ["pro", "starter"],
    ] as const) {
      const id = await withEndpoint(`race-${first}`);
      const t0 = new Date("2026-10-01T00:00:00Z");
      await pay(id, { kind: "plan", plan: "max" }, t0);
      // Both priced before either was written: the account row decides.
      const later = new Date(t0.getTime() + DAY);
      const a = await pending(id, { kind: "plan", plan: first }, later);
      await conflict(pending(id, { kind: "plan", plan: second }, later));
      const done = await applyPayment(
        db(),
        a.id,
        { transaction: `0x${"cd".repeat(32)}`, payer: null },
        SETTINGS,
        later,
      );
      assert.equal(done.applied, true);
      const account = await readAccountBilling(db(), id);
      assert.equal(account.plan, "max");
      assert.equal(account.nextPlan, first, `${first} then ${second}`);
      assert.equal(account.nextPlanDays, 30);
      assert.deepEqual(
        (await planRows(id)).map((r) => `${r.plan}:${r.status}`),
        ["max:paid", `${first}:paid`],
      );
    }
  });

  test("one Pro and five Starters sent together for after Max: one is bought, for its own plan and 30 days", async () => {
    const id = await withEndpoint("race-six");
    const t0 = new Date("2026-10-01T00:00:00Z");
    await pay(id, { kind: "plan", plan: "max" }, t0);
    const later = new Date(t0.getTime() + DAY);
    const account = await readAccountBilling(db(), id);
    const orders = ["pro", "starter", "starter", "starter", "starter", "starter"] as const;
    // All priced against the same account state, then written at once.
    const written = await Promise.allSettled(
      orders.map((plan) =>
        beginPayment(
          db(),
          {
            accountId: id,
            purchase: priceOrder(account, { kind: "plan", plan }, "dashboard", LIMITS, later),
            source: "dashboard",
            details: {
              authorizationKey: `eip155:8453:test:${randomUUID()}`,
              network: "eip155:8453",
              asset: "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913",
              payTo: "0x7e45000000000000000000000000000000007e45",
              payer: "0x1111111111111111111111111111111111111111",
            },
          },
          later,
        ),
      ),
    );
    const won = written.filter((w) => w.status === "fulfilled");
    assert.equal(won.length, 1, "one advance at a time");
    for (const w of written) {
      if (w.status === "rejected") {
        assert.ok(w.reason instanceof ServiceError && w.reason.code === "conflict");
      }
    }
    const row = won[0]!.value.row;
    await applyPayment(db(), row.id, { transaction: "0x06", payer: null }, SETTINGS, later);
    const after = await readAccountBilling(db(), id);
    assert.equal(after.nextPlan, row.plan);
    assert.equal(after.nextPlanDays, 30);
    const rows = await planRows(id);
    assert.deepEqual(
      rows.map((r) => `${r.plan}:${r.status}`),
      ["max:paid", `${row.plan}:paid`],
    );
  });

  test("a payment for another plan given up as unsettled, then settled after an advance was bought: credited to the balance, the waiting plan untouched", async () => {
    const id = await withEndpoint("race-late");
    const t0 = new Date("2026-10-01T00:00:00Z");
    await pay(id, { kind: "plan", plan: "max" }, t0);
    const later = new Date(t0.getTime() + DAY);
    const late = await pending(id, { kind: "plan", plan: "pro" }, later);
    await failPayment(db(), late.id, "the payment was never settled");
    await pay(id, { kind: "plan", plan: "starter" }, later);
    const done = await applyPayment(
      db(),
      late.id,
      { transaction: "0x07", payer: null },
      SETTINGS,
      later,
    );
    assert.equal(done.applied, true);
    assert.equal(done.row.status, "paid");
    assert.equal(done.row.period_start, null);
    const account = await readAccountBilling(db(), id);
    assert.equal(account.nextPlan, "starter");
    assert.equal(account.nextPlanDays, 30);
    assert.equal(account.balanceMicroUsd, BigInt(DEFAULT_PLAN_PRICES.pro));
  });

  test("an operator comp is refused while a plan paid in advance waits: the paid days are kept", async () => {
    const id = await withEndpoint("comp-waiting");
    const t0 = new Date("2026-10-01T00:00:00Z");
    await pay(id, { kind: "plan", plan: "max" }, t0);
    await pay(id, { kind: "plan", plan: "starter" }, new Date(t0.getTime() + DAY));
    await assert.rejects(
      compPlan(db(), id, "pro", { days: 10 }),
      (e: unknown) => e instanceof ServiceError && e.code === "conflict",
    );
    const account = await readAccountBilling(db(), id);
    assert.deepEqual(
      [account.plan, account.nextPlan, account.nextPlanDays],
      ["max", "starter", 30],
    );
  });

  test("a chosen downgrade waits for the period's end; cancelled, it never comes; pay-as-you-go to Free at the month's end", async () => {
    const id = (await createAccount(db(), "chosen")).id;
    const t0 = new Date("2026-09-10T00:00:00Z");
    await pay(id, { kind: "plan", plan: "pro" }, t0);
    assert.deepEqual(
      (await choosePlanChange(db(), id, "payg", t0)).effective,
      new Date(t0.getTime() + 30 * DAY),
    );
    await cancelPlanChange(db(), id);
    await choosePlanChange(db(), id, "payg", t0);
    await sweepBilling(db(), SETTINGS, new Date(t0.getTime() + 29 * DAY));
    assert.equal((await readAccountBilling(db(), id)).plan, "pro", "not before the end");
    await sweepBilling(db(), SETTINGS, new Date(t0.getTime() + 30 * DAY));
    assert.equal((await readAccountBilling(db(), id)).plan, "payg");
    const t1 = new Date("2026-10-20T00:00:00Z");
    assert.deepEqual((await choosePlanChange(db(), id, "free", t1)).effective, nextMonthStart(t1));
    await sweepBilling(db(), SETTINGS, new Date("2026-10-31T23:59:59Z"));
    assert.equal((await readAccountBilling(db(), id)).plan, "payg");
    await sweepBilling(db(), SETTINGS, new Date("2026-11-01T00:00:00Z"));
    assert.equal((await readAccountBilling(db(), id)).plan, "free");
    // Free to pay-as-you-go costs nothing and is at once.
    await choosePlanChange(db(), id, "payg", t1);
    assert.equal((await readAccountBilling(db(), id)).plan, "payg");
  });

  test("a top-up lifts a balance suspension at once, never the operator's", async () => {
    const id = await withEndpoint("lift");
    await db()
      .updateTable("accounts")
      .set({
        plan: "payg",
        balance_micro_usd: -1000,
        suspended_at: new Date(),
        suspended_by: "billing",
      })
      .where("id", "=", id)
      .execute();
    await pay(id, { kind: "top_up", amountMicroUsd: 1_000_000 }, new Date());
    let account = await readAccountBilling(db(), id);
    assert.equal(account.suspended, false);
    assert.equal(account.balanceMicroUsd, 999_000n);
    assert.deepEqual(await events(id), ["billing.payment_received", "billing.suspension_lifted"]);
    await db()
      .updateTable("accounts")
      .set({ suspended_at: new Date(), suspended_by: "operator" })
      .where("id", "=", id)
      .execute();
    await pay(id, { kind: "top_up", amountMicroUsd: 1_000_000 }, new Date());
    account = await readAccountBilling(db(), id);
    assert.equal(account.suspended, true, "the operator's suspension stays");
    assert.equal(account.balanceMicroUsd, 1_999_000n);
  });

  test("a payment left pending by a request that died: applied by the sweep once its settlement succeeded, failed when nothing was settled", async () => {
    const id = (await createAccount(db(), "orphan")).id;
    const t0 = new Date();
    const row = await pending(id, { kind: "plan", plan: "pro" }, t0);
    const lost = await pending(id, { kind: "plan", plan: "max" }, t0);
    await db()
      .insertInto("settlements")
      .values({
        id: randomUUID(),
        account_id: BILLING_ACCOUNT_ID,
        api_key_id: BILLING_KEY_ID,
        network: "eip155:8453",
        scheme: "exact",
        payer: "0x1111111111111111111111111111111111111111",
        pay_to: "0x7e45000000000000000000000000000000007e45",
        asset: "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913",
        amount: "49000000",
        payload_fingerprint: "f",
        status: "succeeded",
        transaction: "0xfeed",
        error_reason: null,
        error_message: null,
        started_at: t0,
        finished_at: t0,
        duration_ms: 1,
        request: null,
        authorization_key: row.authorization_key,
      })
      .execute();
    // Too recent: the request may still be applying it.
    assert.equal((await sweepBilling(db(), SETTINGS, t0)).resolved, 0);
    const later = new Date(t0.getTime() + 10 * 60_000);
    assert.equal((await sweepBilling(db(), SETTINGS, later)).resolved, 2);
    const account = await readAccountBilling(db(), id);
    assert.equal(account.plan, "pro");
    const rows = await db()
      .selectFrom("billing_payments")
      .select(["id", "status", "transaction", "settlement_id"])
      .where("id", "in", [row.id, lost.id])
      .execute();
    const byId = new Map(rows.map((r) => [r.id, r]));
    assert.equal(byId.get(row.id)!.status, "paid");
    assert.equal(byId.get(row.id)!.transaction, "0xfeed");
    assert.ok(byId.get(row.id)!.settlement_id);
    assert.equal(byId.get(lost.id)!.status, "failed");
  });

  test("comps are recorded as such; the history and its CSV list payments and comps, not failures", async () => {
    const account = await createAccount(db(), "history");
    await createApiKey(db(), account.id, "k");
    await compPlan(db(), account.id, "max", { days: 10, note: "launch partner, =SUM(A1)" });
    await pay(account.id, { kind: "plan", plan: "max" }, new Date());
    const items = await listBillingHistory(
      db(),
      account.id,
      (n, tx) => `https://explorer/${n}/${tx}`,
    );
    assert.deepEqual(
      items.map((i) => [i.kind, i.plan, i.amountUsd, i.source]),
      [
        ["plan", "max", "399.00", "dashboard"],
        ["comp", "max", "0.00", "operator"],
      ],
    );
    assert.match(items[0]!.explorerUrl!, /^https:\/\/explorer\/eip155:8453\/0x/);
    const csv = billingHistoryCsv(items);
    assert.match(csv.split("\r\n")[0]!, /^date,kind,plan,amountUsd,network,transaction/);
    assert.match(csv, /,'=SUM\(A1\)|"launch partner, '?=SUM\(A1\)"/);
  });
});
