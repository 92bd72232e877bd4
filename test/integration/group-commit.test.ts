/**
 * Group commit on the settle path, against the real database (PGlite, and
 * PostgreSQL when available), with its statements counted:
 * - concurrent intents share one insert; a duplicate authorization loses at
 *   the unique index, in the same insert or a later one; a row that fails
 *   its statement fails only its own settle;
 * - concurrent reservations share one transaction and are granted in
 *   arrival order up to the plan's limit, each refusal with its own reason;
 * - concurrent outcomes share one transaction: each row moves once, a
 *   success is billed once, reservations come back, one event per outcome,
 *   and pay-as-you-go bills each settlement against the usage before it;
 * - concurrent journal entries share one statement, and an entry that
 *   cannot be journaled fails alone (and is remembered as not sent);
 * - the pending-settlement store's reads and deletes share one statement.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import type { SettlementNotes } from "../../src/chains/settlementScope.js";
import { runInSettlementScope } from "../../src/chains/settlementScope.js";
import { DbTransactionJournal } from "../../src/features/settlements/transactionJournal.js";
import { availableBackends, openTestDb } from "../support/database.js";
import type { OpenedDb } from "../../src/storage/db.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import {
  QuotaLedger,
  setAccountPlan,
  setAccountSuspended,
  type QuotaReservation,
} from "../../src/features/plans/quotaLedger.js";
import { PAYG_FREE_UNITS, monthOf, type PlanName } from "../../src/features/plans/plans.js";
import { SettlementRecorder } from "../../src/features/settlements/settlementRecorder.js";
import { DbPendingSettlementStore } from "../../src/features/settlements/pendingSettlementStore.js";
import { setWebhookEndpoint } from "../../src/features/webhooks/webhookRepository.js";
import { ServiceError } from "../../src/lib/errors.js";
import { createLogger } from "../../src/lib/logger.js";
import type { PaymentRequest } from "../../src/protocol/index.js";

const log = createLogger("silent");
const LIMITS = { starterLimit: 3, proLimit: 100, maxLimit: 1000 };

const request = (n: number, amount = "5000"): PaymentRequest =>
  ({
    x402Version: 2,
    paymentPayload: { x402Version: 2, payload: { authorization: { n } } },
    paymentRequirements: {
      scheme: "exact",
      network: "eip155:8453",
      asset: "0x2222222222222222222222222222222222222222",
      amount,
      payTo: "0x3333333333333333333333333333333333333333",
      maxTimeoutSeconds: 60,
    },
  }) as unknown as PaymentRequest;

const tx = (n: number) => `0x${n.toString(16).padStart(64, "0")}`;

for (const backend of availableBackends()) {
  describe(`group commit on the settle path (${backend})`, () => {
    let database: OpenedDb;
    let ledger: QuotaLedger;
    let recorder: SettlementRecorder;
    const traffic = { statements: 0, roundTrips: 0 };
    let n = 0;

    /** What `run` cost the database. */
    async function measure<T>(run: () => Promise<T>) {
      traffic.statements = 0;
      traffic.roundTrips = 0;
      const result = await run();
      return { result, statements: traffic.statements, roundTrips: traffic.roundTrips };
    }

    async function principal(name: string, plan: PlanName = "pro") {
      const account = await createAccount(database.db, name);
      await setAccountPlan(database.db, account.id, plan);
      const key = await createApiKey(database.db, account.id, `${name}-key`);
      return { accountId: account.id, keyId: key.id, keyName: key.name };
    }
    type Principal = Awaited<ReturnType<typeof principal>>;

    const begin = (p: Principal, authorizationKey = `gc:${++n}`, amount?: string) =>
      recorder.begin({
        principal: p,
        request: request(++n, amount),
        authorizationKey,
        payer: "0x1111111111111111111111111111111111111111",
        units: 1,
      });

    const usage = (accountId: string) =>
      database.db
        .selectFrom("quota_usage")
        .select(["used", "reserved"])
        .where("account_id", "=", accountId)
        .where("month", "=", monthOf(new Date()))
        .executeTakeFirstOrThrow();

    before(async () => {
      database = await openTestDb(backend, {
        statement: () => {
          traffic.statements++;
          traffic.roundTrips++;
        },
        transactionControl: () => traffic.roundTrips++,
      });
      ledger = new QuotaLedger(database.db, LIMITS);
      recorder = new SettlementRecorder(database.db, log, ledger);
    });
    after(() => database.close());

    test("concurrent intents share one insert; duplicates lose at the unique index", async () => {
      const p = await principal("intents");
      const keys = Array.from({ length: 30 }, (_, i) => `intents:${i}`);
      const { result: ids, statements } = await measure(() =>
        Promise.all([...keys, ...Array<string>(10).fill(keys[0]!)].map((k) => begin(p, k))),
      );
      assert.equal(statements, 1, "forty intents, one statement");
      assert.ok(ids.slice(0, 30).every((id) => typeof id === "string"));
      assert.deepEqual(ids.slice(30), Array(10).fill(undefined), "duplicates in the same insert");
      assert.equal(await begin(p, keys[1]), undefined, "a duplicate in a later insert");
      const live = await database.db
        .selectFrom("settlements")
        .select(["id", "authorization_key"])
        .where("account_id", "=", p.accountId)
        .execute();
      assert.equal(live.length, 30, "one row per authorization");
      assert.equal(live.find((r) => r.authorization_key === keys[0])?.id, ids[0], "first wins");
    });

    test("an intent whose row fails its statement fails alone; the rest of its flush is written", async () => {
      const p = await principal("bad-row");
      const results = await Promise.allSettled([
        begin(p, "bad-row:0"),
        begin(p, "bad-row:1"),
        begin(p, "bad-row:2", "not-a-number"),
        begin(p, "bad-row:3"),
        begin(p, "bad-row:0"),
      ]);
      assert.deepEqual(
        results.map((r) => r.status),
        ["fulfilled", "fulfilled", "rejected", "fulfilled", "fulfilled"],
      );
      const refused = (results[2] as PromiseRejectedResult).reason;
      assert.ok(refused instanceof ServiceError && refused.code === "service_unavailable");
      assert.equal(
        (results[4] as PromiseFulfilledResult<string | undefined>).value,
        undefined,
        "the duplicate still loses to the first",
      );
      const rows = await database.db
        .selectFrom("settlements")
        .select("authorization_key")
        .where("account_id", "=", p.accountId)
        .orderBy("authorization_key")
        .execute();
      assert.deepEqual(
        rows.map((r) => r.authorization_key),
        ["bad-row:0", "bad-row:1", "bad-row:3"],
      );
    });

    test("concurrent reservations share one transaction, granted in arrival order up to the limit", async () => {
      const starter = await principal("starter", "starter");
      const pro = await principal("pro");
      const suspended = await principal("suspended", "payg");
      await setAccountSuspended(database.db, suspended.accountId, true);
      const one = await measure(() => ledger.reserve(pro.accountId, 1, "eip155:8453"));
      const order = [starter, pro, starter, starter, pro, starter, suspended, starter, pro];
      const { result, roundTrips } = await measure(() =>
        Promise.allSettled(order.map((p) => ledger.reserve(p.accountId, 1, "eip155:8453"))),
      );
      // The lone first reservation of a month tries the one-statement grant,
      // finds no row yet, and is decided in turn: it costs one round trip
      // more than a flush of several accounts, which goes straight there.
      assert.ok(roundTrips <= one.roundTrips, "nine reservations cost no more than one does");
      assert.deepEqual(
        result.map((r) => (r.status === "fulfilled" ? "granted" : (r.reason as ServiceError).code)),
        [
          "granted",
          "granted",
          "granted",
          "granted",
          "granted",
          "quota_exceeded",
          "account_suspended",
          "quota_exceeded",
          "granted",
        ],
      );
      const refusal = (result[5] as PromiseRejectedResult).reason as ServiceError;
      assert.deepEqual(refusal.details, {
        plan: "starter",
        limit: 3,
        usedThisMonth: 3,
        upgrade: "/api/billing/upgrade",
      });
      assert.deepEqual(await usage(starter.accountId), { used: 0, reserved: 3 });
      assert.deepEqual(await usage(pro.accountId), { used: 0, reserved: 4 });
      assert.deepEqual(await usage(suspended.accountId), { used: 0, reserved: 0 });
    });

    test("one account's reservations that all fit are one statement; near the limit they are decided in turn", async () => {
      const p = await principal("one-account", "starter");
      // The month's row is created by the first reservation.
      await ledger.reserve(p.accountId, 1, "eip155:8453");
      const fit = await measure(() =>
        Promise.all([
          ledger.reserve(p.accountId, 1, "eip155:8453"),
          ledger.reserve(p.accountId, 1, "eip155:8453"),
        ]),
      );
      assert.equal(fit.statements, 1, "two reservations that fit: one UPDATE");
      assert.equal(fit.roundTrips, 1);
      assert.deepEqual(await usage(p.accountId), { used: 0, reserved: 3 });
      assert.ok(fit.result.every((r) => r.plan === "starter" && r.units === 1));

      // The starter limit is 3: nothing more fits, and nothing is written.
      const over = await measure(() =>
        Promise.allSettled([
          ledger.reserve(p.accountId, 1, "eip155:8453"),
          ledger.reserve(p.accountId, 1, "eip155:8453"),
        ]),
      );
      assert.deepEqual(
        over.result.map((r) =>
          r.status === "rejected" ? (r.reason as ServiceError).code : "granted",
        ),
        ["quota_exceeded", "quota_exceeded"],
      );
      assert.deepEqual(await usage(p.accountId), { used: 0, reserved: 3 });

      // Two units back, then three requests: in turn, the first two fit and the third does not.
      await ledger.release({
        accountId: p.accountId,
        month: monthOf(new Date()),
        units: 2,
        plan: "starter",
      });
      const turn = await measure(() =>
        Promise.allSettled([1, 2, 3].map(() => ledger.reserve(p.accountId, 1, "eip155:8453"))),
      );
      assert.deepEqual(
        turn.result.map((r) =>
          r.status === "rejected" ? (r.reason as ServiceError).code : "granted",
        ),
        ["granted", "granted", "quota_exceeded"],
      );
      assert.deepEqual(await usage(p.accountId), { used: 0, reserved: 3 });
    });

    test("intents asking their reservation get it in their own statement when it fits; a duplicate holds none, and an account near its limit is left to be decided in turn", async () => {
      const p = await principal("reserve-with-intent", "starter");
      const q = await principal("reserve-with-intent-2", "pro");
      // The month's rows exist (created by a first reservation, given back).
      for (const who of [p, q]) {
        const first = await ledger.reserve(who.accountId, 1, "eip155:8453");
        await ledger.release(first);
      }
      const asking = (who: Principal, authorizationKey = `gc:${++n}`) =>
        recorder.beginChecked({
          principal: who,
          request: request(++n),
          authorizationKey,
          payer: "0x1111111111111111111111111111111111111111",
          units: 1,
          reserve: true,
        });
      // Two accounts' intents, and a duplicate of one of them, in one flush.
      const shared = `gc:${++n}`;
      const fit = await measure(() =>
        Promise.all([asking(p, shared), asking(p), asking(q), asking(p, shared)]),
      );
      assert.equal(fit.statements, 1, "the intents and their reservations: one statement");
      assert.equal(fit.roundTrips, 1);
      const [a, b, c, duplicate] = fit.result;
      for (const [got, who] of [
        [a, p],
        [b, p],
        [c, q],
      ] as const) {
        assert.ok(got!.id, "written");
        assert.deepEqual(got!.reservation, {
          accountId: who.accountId,
          month: monthOf(new Date()),
          units: 1,
          plan: who === p ? "starter" : "pro",
        });
      }
      assert.equal(duplicate!.id, undefined, "the duplicate has no row");
      assert.equal(duplicate!.reservation, undefined, "and holds no quota");
      assert.deepEqual(await usage(p.accountId), { used: 0, reserved: 2 });
      assert.deepEqual(await usage(q.accountId), { used: 0, reserved: 1 });

      // Starter allows 3: two more intents do not fit together, so neither
      // is reserved with its intent (both rows are written) and the ledger
      // decides them in turn: one granted, one refused.
      const near = await Promise.all([asking(p), asking(p)]);
      assert.ok(near.every((r) => r.id !== undefined && r.reservation === undefined));
      assert.deepEqual(await usage(p.accountId), { used: 0, reserved: 2 });
      const turn = await Promise.allSettled(
        near.map(() => ledger.reserve(p.accountId, 1, "eip155:8453")),
      );
      assert.deepEqual(
        turn.map((r) => (r.status === "rejected" ? (r.reason as ServiceError).code : "granted")),
        ["granted", "quota_exceeded"],
      );
      assert.deepEqual(await usage(p.accountId), { used: 0, reserved: 3 });

      // A suspended account's intent is written and not reserved: the
      // ledger's own refusal answers it.
      await setAccountSuspended(database.db, q.accountId, true);
      const suspended = await asking(q);
      assert.ok(suspended.id !== undefined && suspended.reservation === undefined);
      assert.deepEqual(await usage(q.accountId), { used: 0, reserved: 1 });
      await setAccountSuspended(database.db, q.accountId, false);
    });

    test("concurrent outcomes share one statement: moved once, billed once, reservations back, one event each", async () => {
      const p = await principal("outcomes");
      await setWebhookEndpoint(database.db, p.accountId, "http://127.0.0.1:9/hook", {
        allowPrivateTargets: true,
      });
      const ids = (await Promise.all(Array.from({ length: 12 }, () => begin(p)))) as string[];
      const reservations = await Promise.all(
        ids.map(() => ledger.reserve(p.accountId, 1, "eip155:8453")),
      );
      // Each settle's reservation goes with its first outcome's write.
      const finish = (i: number, reservation?: QuotaReservation) =>
        recorder.finish(
          ids[i]!,
          i % 2 === 0
            ? { success: true, transaction: tx(i + 1), network: "eip155:8453" }
            : {
                success: false,
                errorReason: "insufficient_funds",
                transaction: "",
                network: "eip155:8453",
              },
          Date.now(),
          undefined,
          reservation,
        );
      const one = await measure(() => finish(0, reservations[0]));
      const rest = await measure(() =>
        Promise.all(ids.slice(1).map((_, i) => finish(i + 1, reservations[i + 1]))),
      );
      assert.equal(rest.roundTrips, one.roundTrips, "eleven outcomes cost what one does");
      // One statement: the transition, which reads what the events need
      // with the rows, the events, and the quota charged and released.
      assert.equal(one.roundTrips, 1, "an outcome flush is one round trip");
      assert.equal(one.statements, 1);

      const rows = await database.db
        .selectFrom("settlements")
        .select(["id", "status", "billed", "transaction"])
        .where("account_id", "=", p.accountId)
        .execute();
      for (const [i, id] of ids.entries()) {
        const row = rows.find((r) => r.id === id)!;
        const succeeded = i % 2 === 0;
        assert.deepEqual(
          [row.status, row.billed, row.transaction],
          succeeded ? ["succeeded", true, tx(i + 1)] : ["failed", false, null],
        );
      }
      assert.deepEqual(await usage(p.accountId), { used: 6, reserved: 0 });
      const events = await database.db
        .selectFrom("webhook_events")
        .select(["settlement_id", "type"])
        .where("account_id", "=", p.accountId)
        .execute();
      assert.equal(events.length, 12, "one event per outcome");
      for (const [i, id] of ids.entries()) {
        assert.equal(
          events.find((e) => e.settlement_id === id)?.type,
          i % 2 === 0 ? "settlement.succeeded" : "settlement.failed",
        );
      }

      // Finishing again (a late duplicate of the same outcomes) moves nothing.
      await Promise.all(ids.map((_, i) => finish(i)));
      assert.deepEqual(await usage(p.accountId), { used: 6, reserved: 0 });
    });

    test("outcomes of several accounts in one flush charge and release each account's own row", async () => {
      const a = await principal("several-a");
      const b = await principal("several-b");
      const owners = [a, b, a, b, b];
      const ids = (await Promise.all(owners.map((p) => begin(p)))) as string[];
      const reservations = await Promise.all(
        owners.map((p) => ledger.reserve(p.accountId, 1, "eip155:8453")),
      );
      await Promise.all(
        ids.map((id, i) =>
          recorder.finish(
            id,
            i < 3
              ? { success: true, transaction: tx(3000 + i), network: "eip155:8453" }
              : { success: false, errorReason: "x", transaction: "", network: "eip155:8453" },
            Date.now(),
            undefined,
            reservations[i],
          ),
        ),
      );
      assert.deepEqual(await usage(a.accountId), { used: 2, reserved: 0 });
      assert.deepEqual(await usage(b.accountId), { used: 1, reserved: 0 });
    });

    test("pay-as-you-go in one flush bills each settlement against the usage before it", async () => {
      const p = await principal("payg-flush", "payg");
      await database.db
        .insertInto("quota_usage")
        .values({ account_id: p.accountId, month: monthOf(new Date()), used: PAYG_FREE_UNITS - 2 })
        .execute();
      const ids = (await Promise.all(Array.from({ length: 4 }, () => begin(p)))) as string[];
      await Promise.all(
        ids.map((id, i) =>
          recorder.finish(
            id,
            { success: true, transaction: tx(1000 + i), network: "eip155:8453" },
            Date.now(),
          ),
        ),
      );
      const charges = await database.db
        .selectFrom("usage_charges")
        .select(["settlement_id", "units"])
        .where("account_id", "=", p.accountId)
        .execute();
      assert.deepEqual(
        charges.map((c) => [c.settlement_id, c.units]).sort(),
        [
          [ids[2], 1],
          [ids[3], 1],
        ].sort(),
        "the first two fit the free allowance; the next two are billed a unit each",
      );
      assert.deepEqual(await usage(p.accountId), { used: PAYG_FREE_UNITS + 2, reserved: 0 });
    });

    test("concurrent journal entries share one statement; an entry that cannot be journaled fails alone", async () => {
      const p = await principal("journal");
      const ids = (await Promise.all(Array.from({ length: 5 }, () => begin(p)))) as string[];
      const entry = (i: number, replaces?: string) => ({
        network: "eip155:8453",
        reference: tx(2000 + i),
        signer: "0xAAAA000000000000000000000000000000000001",
        ...(replaces ? { replaces } : {}),
        detail: { nonce: i, raw: `0x${i}` },
      });
      const sent = await measure(() =>
        Promise.all(ids.map((id, i) => recorder.journal.recordSent(entry(i), id))),
      );
      assert.equal(sent.statements, 1, "five entries, one statement");
      // No such settlement: its entry is refused (nothing journaled), and only it.
      const orphan = randomUUID();
      const results = await Promise.allSettled([
        recorder.journal.recordSent(entry(10, tx(2000)), ids[0]),
        recorder.journal.recordSent(entry(11), orphan),
        recorder.journal.recordSent(entry(12), undefined),
      ]);
      assert.deepEqual(
        results.map((r) => r.status),
        ["fulfilled", "rejected", "fulfilled"],
      );
      // Through the journal port, inside the settlement's scope, the failure
      // is noted for the engine (which answers 503: nothing was sent).
      const notes: SettlementNotes = { sent: false };
      await assert.rejects(
        runInSettlementScope({ id: orphan, notes }, () =>
          new DbTransactionJournal(recorder.journal).sent(entry(13)),
        ),
      );
      assert.equal(notes.journalFailed, true, "noted as not sent");
      const rows = await database.db
        .selectFrom("settlements")
        .select(["id", "transaction"])
        .where("id", "in", ids)
        .execute();
      for (const [i, id] of ids.entries()) {
        assert.equal(
          rows.find((r) => r.id === id)?.transaction,
          tx(2000 + i),
          "each row learns its first transaction; a replacement does not overwrite it",
        );
      }
      const mined = await measure(() =>
        Promise.all([
          ...ids.map((_, i) => recorder.journal.recordFinished(tx(2000 + i), "success", 7n)),
          recorder.journal.recordFinished(tx(2010), "reverted"),
        ]),
      );
      assert.equal(mined.statements, 1, "six receipts, one statement");
      const journal = await database.db
        .selectFrom("settlement_transactions")
        .select(["reference", "status", "block_number", "settlement_id"])
        .where("reference", "in", [...ids.map((_, i) => tx(2000 + i)), tx(2010), tx(2011)])
        .execute();
      assert.equal(journal.length, 6, "the orphan entry was not journaled");
      for (const j of journal) {
        assert.deepEqual(
          [j.status, j.block_number === null ? null : String(j.block_number)],
          j.reference === tx(2010) ? ["reverted", null] : ["success", "7"],
        );
      }
    });

    test("the pending-settlement store's concurrent reads and deletes share one statement each", async () => {
      const store = new DbPendingSettlementStore(database.db);
      await store.set("sig-1", tx(1));
      await store.set("sig-2", tx(2));
      const read = await measure(() =>
        Promise.all([store.get("sig-1"), store.get("sig-2"), store.get("sig-3")]),
      );
      assert.deepEqual(read.result, [tx(1), tx(2), undefined]);
      assert.equal(read.statements, 1);
      const deleted = await measure(() =>
        Promise.all([store.delete("sig-1"), store.delete("sig-2"), store.delete("sig-3")]),
      );
      assert.equal(deleted.statements, 1);
      assert.deepEqual(await Promise.all([store.get("sig-1"), store.get("sig-2")]), [
        undefined,
        undefined,
      ]);
    });

    test("a settle's own pending-store key is read in its intent's statement, and the store answers it from the settle's scope", async () => {
      // Another replica left sig-7's transaction pending.
      await new DbPendingSettlementStore(database.db).set("sig-7", tx(7));
      const store = new DbPendingSettlementStore(database.db);
      const p = await principal("pending-key");
      const begun = await measure(() =>
        recorder.beginChecked({
          principal: p,
          request: request(70),
          authorizationKey: `auth-${randomUUID()}`,
          payer: "0xpayer70",
          units: 1,
          pendingKey: "sig-7",
        }),
      );
      assert.equal(begun.statements, 1, "the intent and the store's row, one statement");
      assert.ok(begun.result.id);
      assert.deepEqual(begun.result.pending, { key: "sig-7", transaction: tx(7) });
      const scope = {
        id: begun.result.id,
        notes: { sent: false } as SettlementNotes,
        pendingSettlement: begun.result.pending,
      };
      await runInSettlementScope(scope, async () => {
        const own = await measure(() => store.get("sig-7"));
        assert.equal(own.result, tx(7));
        assert.equal(own.statements, 0, "its own key costs no statement");
        // Another key is read from the table.
        const other = await measure(() => store.get("sig-8"));
        assert.equal(other.statements, 1);
        // Its own outcome deletes the row (it was seen), and the read follows.
        const deleted = await measure(() => store.delete("sig-7"));
        assert.equal(deleted.statements, 1, "the row it found is deleted");
        assert.equal(await store.get("sig-7"), undefined);
        await store.set("sig-7", tx(77));
        assert.equal(await store.get("sig-7"), tx(77), "and follows what it writes");
      });
      const row = await database.db
        .selectFrom("pending_settlements")
        .select("tx_hash")
        .where("key", "=", "sig-7")
        .executeTakeFirstOrThrow();
      assert.equal(row.tx_hash, tx(77));
    });

    test("the pending-settlement store deletes without a statement only what it never saw stored", async () => {
      // Another replica stored sig-4; this one has not read it yet.
      await new DbPendingSettlementStore(database.db).set("sig-4", tx(4));
      const store = new DbPendingSettlementStore(database.db);
      const unseen = await measure(() => store.delete("sig-5"));
      assert.equal(unseen.statements, 0, "a key never stored costs no statement");
      assert.equal(await store.get("sig-4"), tx(4));
      const seen = await measure(() => store.delete("sig-4"));
      assert.equal(seen.statements, 1);
      const rows = await database.db
        .selectFrom("pending_settlements")
        .select("key")
        .where("key", "in", ["sig-4", "sig-5"])
        .execute();
      assert.deepEqual(rows, [], "the row another replica stored is gone once read and deleted");
    });

    test("the pending-settlement store's write never throws: its failure must not turn a transaction in flight into a failed answer", async () => {
      const down = await openTestDb(backend);
      await down.close();
      const store = new DbPendingSettlementStore(down.db);
      await assert.doesNotReject(store.set("sig-6", tx(6)));
      const rows = await database.db
        .selectFrom("pending_settlements")
        .select("key")
        .where("key", "=", "sig-6")
        .execute();
      assert.deepEqual(rows, [], "nothing was written");
    });
  });
}
