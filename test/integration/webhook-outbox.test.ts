/**
 * The webhook outbox without a chain: events are written in the transaction
 * that finishes a settlement (recorder and reconciler), only for finished
 * rows of accounts with an endpoint; two workers sharing one database
 * deliver every event exactly once per attempt and in order per account;
 * an event given up lets the next one through.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { CompiledQuery, sql } from "kysely";
import { Webhook } from "standardwebhooks";
import { openTestDb, availableBackends } from "../support/database.js";
import type { OpenedDb } from "../../src/storage/db.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { SettlementRecorder } from "../../src/features/settlements/settlementRecorder.js";
import { SettlementReconciler } from "../../src/workers/settlementReconciler.js";
import { WebhookDeliveryWorker, claimDueEvents } from "../../src/workers/webhookDelivery.js";
import {
  listWebhookDeliveries,
  setWebhookEndpoint,
} from "../../src/features/webhooks/webhookRepository.js";
import { createLogger } from "../../src/lib/logger.js";
import type { PaymentRequest } from "../../src/facilitator/paymentFacilitator.js";

const log = createLogger("silent");

const request = (n: number): PaymentRequest =>
  ({
    x402Version: 2,
    paymentPayload: {
      x402Version: 2,
      payload: { authorization: { from: "0x1111111111111111111111111111111111111111", n } },
    },
    paymentRequirements: {
      scheme: "exact",
      network: "eip155:8453",
      asset: "0x2222222222222222222222222222222222222222",
      amount: "5000",
      payTo: "0x3333333333333333333333333333333333333333",
      maxTimeoutSeconds: 60,
    },
  }) as unknown as PaymentRequest;

/** A settle intent for payment `n`: each its own authorization. */
function intent(p: Awaited<ReturnType<typeof principal>>, n: number) {
  return {
    principal: p,
    request: request(n),
    authorizationKey: `test:${p.accountId}:${n}`,
    payer: undefined,
    units: 1,
  };
}

async function principal(db: OpenedDb["db"], name: string) {
  const account = await createAccount(db, name);
  const key = await createApiKey(db, account.id, `${name}-key`);
  return { accountId: account.id, keyId: key.id, keyName: key.name };
}

for (const backend of availableBackends()) {
  describe(`webhook outbox (${backend})`, () => {
    let database: OpenedDb;
    let receiver: http.Server;
    let url = "";
    const secrets = new Map<string, string>();
    const received: { accountId: string; eventId: string; settlementId: string }[] = [];
    let inFlight = new Set<string>();
    let overlaps = 0;
    const traffic = { roundTrips: 0 };

    before(async () => {
      database = await openTestDb(backend, {
        statement: () => traffic.roundTrips++,
        transactionControl: () => traffic.roundTrips++,
      });
      receiver = http.createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on("data", (c: Buffer) => chunks.push(c));
        req.on("end", () => {
          const accountId = new URL(req.url ?? "/", "http://x").searchParams.get("a")!;
          const body = Buffer.concat(chunks).toString("utf8");
          const event = new Webhook(secrets.get(accountId)!).verify(body, {
            "webhook-id": String(req.headers["webhook-id"]),
            "webhook-timestamp": String(req.headers["webhook-timestamp"]),
            "webhook-signature": String(req.headers["webhook-signature"]),
          }) as { id: string; data: { id: string } };
          if (inFlight.has(event.id)) overlaps++;
          inFlight.add(event.id);
          setTimeout(() => {
            inFlight.delete(event.id);
            received.push({ accountId, eventId: event.id, settlementId: event.data.id });
            res.writeHead(200).end();
          }, 5);
        });
      });
      await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
      url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    });
    after(async () => {
      receiver.closeAllConnections();
      await new Promise((r) => receiver.close(r));
      await database.close();
    });

    test("the recorder writes the event with the outcome, and only when it is due", async () => {
      const db = database.db;
      const recorder = new SettlementRecorder(db, log);
      const p = await principal(db, "outbox-a");
      const events = (id: string) =>
        db.selectFrom("webhook_events").selectAll().where("settlement_id", "=", id).execute();

      // No endpoint: no event.
      const s1 = (await recorder.begin(intent(p, 1)))!;
      await recorder.finish(
        s1,
        { success: true, transaction: "0xaa", network: "eip155:8453" },
        Date.now(),
      );
      assert.equal((await events(s1)).length, 0);

      const ep = await setWebhookEndpoint(db, p.accountId, `${url}?a=${p.accountId}`, {
        allowPrivateTargets: true,
      });
      secrets.set(p.accountId, ep.secret);

      // Still pending: no event yet.
      const s2 = (await recorder.begin(intent(p, 2)))!;
      await recorder.finish(
        s2,
        {
          success: false,
          errorReason: "settlement_pending",
          transaction: "0xbb",
          network: "eip155:8453",
        },
        Date.now(),
      );
      assert.equal((await events(s2)).length, 0);

      const s3 = (await recorder.begin(intent(p, 3)))!;
      await recorder.finish(
        s3,
        {
          success: false,
          errorReason: "insufficient_funds",
          errorMessage: "not enough",
          transaction: "",
          network: "eip155:8453",
        },
        Date.now(),
      );
      const [e3] = await events(s3);
      assert.equal(e3!.type, "settlement.failed");
      assert.equal(e3!.status, "pending");
      const payload = JSON.parse(e3!.payload) as { id: string; data: Record<string, unknown> };
      assert.equal(payload.id, e3!.id);
      assert.equal(payload.data["errorReason"], "insufficient_funds");
      assert.equal(payload.data["errorMessage"], "not enough");
      assert.equal(payload.data["apiKeyName"], "outbox-a-key");
      assert.equal(payload.data["amount"], "5000");

      // The reconciler finishes s2: its event is written by the same guarded update.
      const reconciler = new SettlementReconciler({
        recorder,
        log,
        olderThanMs: 0,
        reconcile: async () => ({ status: "succeeded", transaction: "0xbb" }),
      });
      assert.equal(await reconciler.runOnce(), 1);
      const [e2] = await events(s2);
      assert.equal(e2!.type, "settlement.succeeded");
      assert.equal(JSON.parse(e2!.payload).data.transaction, "0xbb");
      assert.equal(await reconciler.runOnce(), 0, "a finished row is not finished twice");
      assert.equal((await events(s2)).length, 1);

      // Atomic: when the event cannot be written, the outcome is not written either.
      await sql`ALTER TABLE webhook_events RENAME TO webhook_events_away`.execute(db);
      try {
        const s4 = (await recorder.begin(intent(p, 4)))!;
        await recorder.finish(
          s4,
          { success: true, transaction: "0xcc", network: "eip155:8453" },
          Date.now(),
        );
        const row = await db
          .selectFrom("settlements")
          .select(["status", "transaction"])
          .where("id", "=", s4)
          .executeTakeFirstOrThrow();
        assert.equal(row.status, "pending");
        assert.equal(row.transaction, null);
      } finally {
        await sql`ALTER TABLE webhook_events_away RENAME TO webhook_events`.execute(db);
      }
      // Leave nothing for the next test to deliver.
      await db.updateTable("webhook_events").set({ status: "failed" }).execute();
    });

    test("two workers share the outbox: each event once, in order per account", async () => {
      const db = database.db;
      const recorder = new SettlementRecorder(db, log);
      const accounts = [];
      for (let i = 0; i < 4; i++) {
        const p = await principal(db, `replica-${i}`);
        const ep = await setWebhookEndpoint(db, p.accountId, `${url}?a=${p.accountId}`, {
          allowPrivateTargets: true,
        });
        secrets.set(p.accountId, ep.secret);
        accounts.push(p);
      }
      const written = new Map<string, string[]>();
      for (let n = 0; n < 12; n++) {
        for (const p of accounts) {
          const id = (await recorder.begin(intent(p, 100 + n)))!;
          await recorder.finish(
            id,
            { success: true, transaction: "0xdd", network: "eip155:8453" },
            Date.now(),
          );
          written.set(p.accountId, [...(written.get(p.accountId) ?? []), id]);
        }
      }
      received.length = 0;
      inFlight = new Set();
      const workers = [0, 1].map(
        () =>
          new WebhookDeliveryWorker({
            db,
            log,
            allowPrivateTargets: true,
            pollIntervalMs: 5,
            timeoutMs: 2_000,
            // Runs of three: each account's backlog is split into several
            // runs, which the two workers race for.
            runLength: 3,
          }),
      );
      workers.forEach((w) => w.start());
      try {
        const deadline = Date.now() + 30_000;
        while (received.length < 48 && Date.now() < deadline)
          await new Promise((r) => setTimeout(r, 20));
      } finally {
        await Promise.all(workers.map((w) => w.stop()));
      }
      assert.equal(received.length, 48, "every event delivered exactly once");
      assert.equal(new Set(received.map((r) => r.eventId)).size, 48);
      assert.equal(overlaps, 0);
      for (const p of accounts) {
        assert.deepEqual(
          received.filter((r) => r.accountId === p.accountId).map((r) => r.settlementId),
          written.get(p.accountId),
          "in order per account",
        );
        const attempts = await listWebhookDeliveries(db, p.accountId);
        assert.equal(attempts.length, 12);
        assert.ok(attempts.every((a) => a.statusCode === 200 && a.attempt === 1));
      }
    });

    test("one account's backlog drains in runs, pass after pass, without waiting for the poll interval", async () => {
      const db = database.db;
      const recorder = new SettlementRecorder(db, log);
      const p = await principal(db, "backlog");
      const ep = await setWebhookEndpoint(db, p.accountId, `${url}?a=${p.accountId}`, {
        allowPrivateTargets: true,
      });
      secrets.set(p.accountId, ep.secret);
      const written: string[] = [];
      for (let n = 0; n < 8; n++) {
        const id = (await recorder.begin(intent(p, 300 + n)))!;
        await recorder.finish(
          id,
          { success: true, transaction: "0xcc", network: "eip155:8453" },
          Date.now(),
        );
        written.push(id);
      }
      received.length = 0;
      inFlight = new Set();
      traffic.roundTrips = 0;
      // An hour between idle passes: only passes that follow a delivery at
      // once can deliver more than the first event.
      const worker = new WebhookDeliveryWorker({
        db,
        log,
        allowPrivateTargets: true,
        pollIntervalMs: 3_600_000,
        timeoutMs: 2_000,
        runLength: 3,
      });
      worker.start();
      const mine = () => received.filter((r) => r.accountId === p.accountId);
      try {
        const deadline = Date.now() + 30_000;
        while (mine().length < written.length && Date.now() < deadline)
          await new Promise((r) => setTimeout(r, 20));
      } finally {
        await worker.stop();
      }
      assert.deepEqual(
        mine().map((r) => r.settlementId),
        written,
        "every event of the backlog, once each, in order",
      );
      // Three runs (3 + 3 + 2 events), each one claim (which reads the
      // endpoint too) and one statement recording all its attempts with
      // their events' new state; the last pass's claim finds nothing.
      assert.ok(
        traffic.roundTrips <= 2 * 3 + 1,
        `${traffic.roundTrips} round trips to deliver ${written.length} events`,
      );
      const pending = await db
        .selectFrom("webhook_events")
        .select("id")
        .where("account_id", "=", p.accountId)
        .where("status", "=", "pending")
        .execute();
      assert.equal(pending.length, 0);
    });

    test("a failed attempt ends its run: the events behind it are handed back, and go out in order after the retry", async () => {
      const db = database.db;
      const p = await principal(db, "run-failure");
      // A receiver that refuses the third event once.
      const order: string[] = [];
      let refused = false;
      const flaky = await listen((settlementId, res) => {
        order.push(settlementId);
        if (settlementId === written[2] && !refused) {
          refused = true;
          res.writeHead(503).end();
        } else res.writeHead(200).end();
      });
      // Events are written only for an account with an endpoint.
      await setWebhookEndpoint(db, p.accountId, flaky.url, { allowPrivateTargets: true });
      const written = await finishMany(db, p, 6, 1_000);
      const worker = new WebhookDeliveryWorker({
        db,
        log,
        allowPrivateTargets: true,
        timeoutMs: 2_000,
        backoffBaseMs: 3_600_000,
      });
      const states = () => eventStates(db, p.accountId);
      try {
        await worker.runOnce();
        assert.deepEqual(order, written.slice(0, 3), "the run stopped at the refused event");
        const after = await states();
        assert.deepEqual(
          after.map((e) => [e.status, e.attempts, e.locked_until]),
          [
            ["delivered", 1, null],
            ["delivered", 1, null],
            ["pending", 1, null],
            ["pending", 0, null],
            ["pending", 0, null],
            ["pending", 0, null],
          ],
          "the events behind it are neither leased nor counted as attempted",
        );
        const attempts = (await listWebhookDeliveries(db, p.accountId)).reverse();
        assert.deepEqual(
          attempts.map((a) => a.statusCode),
          [200, 200, 503],
        );
        assert.ok(attempts[2]!.nextRetryAt, "the refused attempt has its retry");
        await worker.runOnce();
        assert.equal(order.length, 3, "nothing goes out before the refused event's retry is due");

        await db
          .updateTable("webhook_events")
          .set({ next_attempt_at: new Date(Date.now() - 1_000) })
          .where("settlement_id", "=", written[2]!)
          .execute();
        await worker.runOnce();
        assert.deepEqual(order, [...written.slice(0, 3), ...written.slice(2)]);
        const finished = await states();
        assert.deepEqual(
          finished.map((e) => [e.status, e.attempts]),
          [
            ["delivered", 1],
            ["delivered", 1],
            ["delivered", 2],
            ["delivered", 1],
            ["delivered", 1],
            ["delivered", 1],
          ],
        );
      } finally {
        await flaky.close();
        await retire(db, [p.accountId]);
      }
    });

    test("a worker stopped mid-run records what it sent and hands back the rest", async () => {
      const db = database.db;
      const p = await principal(db, "run-stop");
      const got: string[] = [];
      const slow = await listen((settlementId, res) => {
        got.push(settlementId);
        setTimeout(() => res.writeHead(200).end(), 30);
      });
      await setWebhookEndpoint(db, p.accountId, slow.url, { allowPrivateTargets: true });
      await finishMany(db, p, 10, 2_000);
      const worker = new WebhookDeliveryWorker({ db, log, allowPrivateTargets: true });
      try {
        worker.start();
        const deadline = Date.now() + 10_000;
        while (got.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
        await worker.stop();
        const events = await eventStates(db, p.accountId);
        const delivered = events.filter((e) => e.status === "delivered");
        assert.ok(delivered.length >= 2 && delivered.length < 10, `${delivered.length} delivered`);
        assert.deepEqual(
          delivered.map((e) => e.settlement_id),
          got,
          "every event the receiver got is recorded as delivered, and no other",
        );
        assert.deepEqual(
          events.slice(delivered.length).map((e) => [e.status, e.attempts, e.locked_until]),
          Array.from({ length: 10 - delivered.length }, () => ["pending", 0, null]),
          "the rest are free for the next worker, with no attempt counted",
        );
        assert.equal((await listWebhookDeliveries(db, p.accountId)).length, delivered.length);
      } finally {
        await slow.close();
        await retire(db, [p.accountId]);
      }
    });

    test("a run is taken only behind a head the claim leased, and only as far as every event is due", async () => {
      const db = database.db;
      const busy = await principal(db, "run-bounds");
      const held = await principal(db, "run-held");
      const mine = [busy.accountId, held.accountId];
      for (const p of [busy, held])
        await setWebhookEndpoint(db, p.accountId, `${url}?a=${p.accountId}`, {
          allowPrivateTargets: true,
        });
      const busyEvents = await finishMany(db, busy, 8, 3_000);
      await finishMany(db, held, 3, 3_100);
      try {
        // The busy account's fifth event is not due (as after a crash left it
        // leased); the held account's head is leased by another worker.
        await db
          .updateTable("webhook_events")
          .set({ locked_until: new Date(Date.now() + 60_000) })
          .where("settlement_id", "=", busyEvents[4]!)
          .execute();
        const heldHead = await db
          .selectFrom("webhook_events")
          .select("id")
          .where("account_id", "=", held.accountId)
          .orderBy("seq")
          .limit(1)
          .executeTakeFirstOrThrow();
        await db
          .updateTable("webhook_events")
          .set({ locked_until: new Date(Date.now() + 60_000) })
          .where("id", "=", heldHead.id)
          .execute();

        const claimed = (await claimDueEvents(60_000, 20, 6).execute(db)).rows.filter((c) =>
          mine.includes(c.account_id),
        );
        const settlementOf = new Map(
          (
            await db
              .selectFrom("webhook_events")
              .select(["id", "settlement_id"])
              .where("account_id", "in", mine)
              .execute()
          ).map((e) => [e.id, e.settlement_id]),
        );
        assert.deepEqual(
          claimed.map((c) => settlementOf.get(c.id)),
          busyEvents.slice(0, 4),
          "the busy account's four oldest, in order, and nothing of the held account",
        );
        assert.ok(claimed.every((c) => c.attempts === 1 && c.url?.includes(busy.accountId)));
      } finally {
        await retire(db, mine);
      }
    });

    test("an event given up after maxAttempts lets the next one through", async () => {
      const db = database.db;
      const recorder = new SettlementRecorder(db, log);
      const p = await principal(db, "give-up");
      // An endpoint nobody listens on: connection refused.
      const dead = http.createServer();
      await new Promise<void>((r) => dead.listen(0, "127.0.0.1", r));
      const deadPort = (dead.address() as AddressInfo).port;
      await new Promise((r) => dead.close(r));
      await setWebhookEndpoint(db, p.accountId, `http://127.0.0.1:${deadPort}/`, {
        allowPrivateTargets: true,
      });
      for (const n of [1, 2]) {
        const id = (await recorder.begin(intent(p, 200 + n)))!;
        await recorder.finish(
          id,
          { success: true, transaction: "0xee", network: "eip155:8453" },
          Date.now(),
        );
      }
      const worker = new WebhookDeliveryWorker({
        db,
        log,
        allowPrivateTargets: true,
        backoffBaseMs: 1,
        backoffMaxMs: 1,
        maxAttempts: 3,
        timeoutMs: 1_000,
      });
      for (let i = 0; i < 40; i++) {
        await worker.runOnce();
        await new Promise((r) => setTimeout(r, 10));
      }
      const events = await db
        .selectFrom("webhook_events")
        .select(["status", "attempts"])
        .where("account_id", "=", p.accountId)
        .orderBy("seq")
        .execute();
      assert.deepEqual(events, [
        { status: "failed", attempts: 3 },
        { status: "failed", attempts: 3 },
      ]);
      const attempts = (await listWebhookDeliveries(db, p.accountId)).reverse();
      assert.equal(attempts.length, 6);
      assert.deepEqual(
        attempts.map((a) => a.attempt),
        [1, 2, 3, 1, 2, 3],
      );
      assert.equal(attempts[2]!.nextRetryAt, null, "the last attempt has no next retry");
      assert.ok(attempts[0]!.nextRetryAt);
    });
    test("a claim reads each account's head, not its backlog", async () => {
      const db = database.db;
      const recorder = new SettlementRecorder(db, log);
      const busy = await principal(db, "claim-backlog");
      const others = [await principal(db, "claim-a"), await principal(db, "claim-b")];
      const finishOne = async (p: Awaited<ReturnType<typeof principal>>, n: number) => {
        const id = (await recorder.begin(intent(p, n)))!;
        await recorder.finish(
          id,
          { success: true, transaction: "0xab", network: "eip155:8453" },
          Date.now(),
        );
      };
      for (const p of [busy, ...others])
        await setWebhookEndpoint(db, p.accountId, `${url}?a=${p.accountId}`, {
          allowPrivateTargets: true,
        });
      const backlog = 300;
      await Promise.all(Array.from({ length: backlog }, (_, n) => finishOne(busy, 500 + n)));
      await Promise.all(others.map((p) => finishOne(p, 900)));
      const mine = [busy, ...others].map((p) => p.accountId);
      try {
        // EXPLAIN ANALYZE runs the claim and counts the rows each plan node
        // read from webhook_events.
        const claim = claimDueEvents(60_000, 20).compile(db);
        const explained = await db.executeQuery<{ "QUERY PLAN": unknown }>(
          CompiledQuery.raw(`EXPLAIN (ANALYZE, FORMAT JSON) ${claim.sql}`, [...claim.parameters]),
        );
        const raw = explained.rows[0]!["QUERY PLAN"];
        const plan = (typeof raw === "string" ? JSON.parse(raw) : raw) as [{ Plan: PlanNode }];
        const rowsRead = readFrom(plan[0].Plan, "webhook_events");
        console.log(
          JSON.stringify(
            plan[0].Plan,
            (k, v) =>
              [
                "Output",
                "Startup Cost",
                "Total Cost",
                "Plan Width",
                "Actual Startup Time",
                "Actual Total Time",
                "Parallel Aware",
                "Async Capable",
              ].includes(k)
                ? undefined
                : v,
            1,
          ),
        );
        // Three accounts have pending events: a walk of about two entries per
        // account, and the three heads themselves. Reading the backlog costs
        // at least one entry per pending event (300 here).
        assert.ok(rowsRead < 30, `the claim read ${rowsRead} rows of webhook_events`);
        const leased = await db
          .selectFrom("webhook_events")
          .select(["account_id", "seq"])
          .where("account_id", "in", mine)
          .where("locked_until", "is not", null)
          .execute();
        assert.equal(leased.length, 3, "one head per account claimed");
        const firstOfBusy = await db
          .selectFrom("webhook_events")
          .select((eb) => eb.fn.min("seq").as("seq"))
          .where("account_id", "=", busy.accountId)
          .executeTakeFirstOrThrow();
        assert.equal(
          String(leased.find((l) => l.account_id === busy.accountId)?.seq),
          String(firstOfBusy.seq),
          "the busy account's claimed event is its oldest",
        );
      } finally {
        await retire(db, mine);
      }
    });
  });
}

interface PlanNode {
  "Relation Name"?: string;
  "Index Name"?: string;
  "Actual Rows"?: number;
  "Actual Loops"?: number;
  Plans?: PlanNode[];
}

/** Rows and index entries a plan's nodes read from `table`, over all their loops. */
function readFrom(node: PlanNode, table: string): number {
  const reads =
    node["Relation Name"] === table || node["Index Name"]?.startsWith(`${table}_`)
      ? (node["Actual Rows"] ?? 0) * (node["Actual Loops"] ?? 1)
      : 0;
  return reads + (node.Plans ?? []).reduce((sum, child) => sum + readFrom(child, table), 0);
}

/** `n` finished settlements of `p`, each writing its webhook event; their ids, oldest first. */
async function finishMany(
  db: OpenedDb["db"],
  p: Awaited<ReturnType<typeof principal>>,
  n: number,
  first: number,
): Promise<string[]> {
  const recorder = new SettlementRecorder(db, log);
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const id = (await recorder.begin(intent(p, first + i)))!;
    await recorder.finish(
      id,
      { success: true, transaction: "0xfe", network: "eip155:8453" },
      Date.now(),
    );
    ids.push(id);
  }
  return ids;
}

/** An account's outbox events, oldest first, with their delivery state. */
function eventStates(db: OpenedDb["db"], accountId: string) {
  return db
    .selectFrom("webhook_events")
    .select(["settlement_id", "status", "attempts", "locked_until"])
    .where("account_id", "=", accountId)
    .orderBy("seq")
    .execute();
}

/** Nothing of these accounts is left for another test's workers to deliver. */
async function retire(db: OpenedDb["db"], accountIds: string[]): Promise<void> {
  await db
    .updateTable("webhook_events")
    .set({ status: "failed", locked_until: null })
    .where("account_id", "in", accountIds)
    .where("status", "=", "pending")
    .execute();
}

/** A webhook receiver on loopback that hands each event's settlement id to `answer`. */
async function listen(
  answer: (settlementId: string, res: http.ServerResponse) => void,
): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const event = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { data: { id: string } };
      answer(event.data.id, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
