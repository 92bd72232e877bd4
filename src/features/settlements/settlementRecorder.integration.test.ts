/**
 * The settlements repository on its own (no HTTP): one live record per
 * authorization, a record leaves `pending` exactly once, its success is
 * billed once whoever records it, an outage is `not_attempted` and emits
 * nothing, and a withdrawn intent leaves no row.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  sql,
  type Transaction,
} from "kysely";
import type { Database } from "../../storage/schema.js";
import { openMigratedDb, type OpenedDb } from "../../storage/db.js";
import { createLogger } from "../../lib/logger.js";
import { createAccount } from "../accounts/accounts.js";
import { createApiKey } from "../keys/apiKeys.js";
import { QuotaLedger } from "../plans/quotaLedger.js";
import { monthOf } from "../plans/plans.js";
import { SettlementRecorder } from "./settlementRecorder.js";
import { recentSuccessesQuery } from "./settlementReads.js";
import { dropSignedMaterialStatement } from "./settlementWrites.js";
import { DbTransactionJournal } from "./transactionJournal.js";
import { Settlement } from "./settlement.js";
import { runInSettlementScope } from "../../chains/settlementScope.js";
import { SAMPLE_REQUEST, openRecorderFixture } from "../../../test/support/recorder.js";

const request = SAMPLE_REQUEST;

describe("settlement recorder", () => {
  let database: OpenedDb;
  let recorder: SettlementRecorder;
  let principal: { accountId: string; keyId: string; keyName: string };
  let n = 0;
  before(async () => {
    ({ database, recorder, principal } = await openRecorderFixture(
      "recorder",
      (opened) => new QuotaLedger(opened.db, { starterLimit: 1, proLimit: 1, maxLimit: 1 }),
    ));
  });
  after(() => database.close());

  const begin = (authorizationKey = `auth-${++n}`) =>
    recorder.begin({ principal, request, authorizationKey, payer: "0xAbC", units: 1 });
  const used = async () =>
    (
      await database.db
        .selectFrom("quota_usage")
        .select("used")
        .where("account_id", "=", principal.accountId)
        .where("month", "=", monthOf(new Date()))
        .executeTakeFirst()
    )?.used ?? 0;

  test("a second live record for one authorization is refused; after a failure it is allowed", async () => {
    const first = await begin("same");
    assert.ok(first);
    assert.equal(await begin("same"), undefined, "pending holds the key");
    await recorder.finish(
      first,
      {
        success: false,
        errorReason: "insufficient_funds",
        transaction: "",
        network: "eip155:8453",
      },
      Date.now(),
    );
    assert.ok(await begin("same"), "a failed attempt does not hold the key");
  });

  test("a record leaves pending once; the success is billed once, by whoever records it", async () => {
    const id = (await begin())!;
    const before = await used();
    const moved = await recorder.finishFromChain(
      id,
      { status: "succeeded", transaction: "0xaa" },
      [],
    );
    assert.equal(moved?.status, "succeeded");
    assert.equal(
      await recorder.finishFromChain(id, { status: "failed", reason: "x", message: "y" }, []),
      undefined,
      "a final record is not rewritten",
    );
    // The original request finishing late changes nothing either.
    await recorder.finish(
      id,
      { success: true, transaction: "0xaa", network: "eip155:8453" },
      Date.now(),
    );
    const row = (await recorder.reads.get(id))!;
    assert.deepEqual([row.status, row.transaction, row.billed], ["succeeded", "0xaa", true]);
    assert.equal(await used(), before + 1);
  });

  test("an outage is not_attempted, unbilled and frees the authorization", async () => {
    const id = (await begin("outage"))!;
    await recorder.notAttempted(id, "RPC unreachable", Date.now());
    const row = (await recorder.reads.get(id))!;
    assert.deepEqual(
      [row.status, row.error_reason, row.billed],
      ["not_attempted", "service_unavailable", false],
    );
    assert.ok(await begin("outage"), "a retry may settle it");
  });

  test("a withdrawn intent leaves no row", async () => {
    const id = (await begin("withdrawn"))!;
    await recorder.withdraw(id);
    assert.equal(await recorder.reads.get(id), undefined);
    assert.equal(await recorder.reads.findLive("withdrawn"), undefined);
  });

  test("attempts count every request the record answered", async () => {
    const id = (await begin())!;
    await recorder.countAttempt(id);
    await recorder.countAttempt(id);
    assert.equal((await recorder.reads.get(id))!.attempts, 3);
  });

  test("the reverted transactions' fees of a network are summed from the journal, every sender's", async () => {
    const since = new Date(Date.now() - 1000);
    const send = async (reference: string, network: string) =>
      recorder.journal.recordSent({ network, reference, signer: "0xabc", detail: {} }, undefined);
    await send("0xr1", "eip155:10");
    await send("0xr2", "eip155:10");
    await send("0xok", "eip155:10");
    await send("0xother", "eip155:8453");
    await recorder.journal.recordFinished("0xr1", "reverted", 5n, 700n);
    await recorder.journal.recordFinished("0xr2", "reverted", 6n, 50n);
    await recorder.journal.recordFinished("0xok", "success", 6n, 9_000n);
    await recorder.journal.recordFinished("0xother", "reverted", 6n, 1n);
    assert.equal((await recorder.journal.failedFeeExposure("eip155:10", since)).reverted, 750n);
    assert.equal(
      (await recorder.journal.failedFeeExposure("eip155:10", new Date(Date.now() + 60_000)))
        .reverted,
      0n,
    );
  });

  test("each account's failed fees are summed apart, and a mined transaction of a settlement recorded failed counts as failed", async () => {
    const since = new Date(Date.now() - 1000);
    const network = "eip155:per-account";
    const id = (await begin())!;
    await recorder.journal.recordSent(
      { network, reference: "0xmined-empty", signer: "s", detail: {} },
      id,
    );
    await recorder.journal.recordFinished("0xmined-empty", "success", 7n, 400n);
    await recorder.journal.recordSent(
      { network, reference: "0xnobody", signer: "s", detail: {} },
      undefined,
    );
    await recorder.journal.recordFinished("0xnobody", "reverted", 7n, 30n);
    // Mined, but the settlement moved nothing and is recorded failed (a
    // batch settle with nothing left to pay): its gas was lost all the same.
    await recorder.finish(
      id,
      { success: false, errorReason: "x", transaction: "0xmined-empty", network: "eip155:8453" },
      Date.now(),
    );
    const exposure = await recorder.journal.failedFeeExposure(network, since);
    assert.equal(exposure.reverted, 430n);
    assert.deepEqual(exposure.accounts?.get(principal.accountId), { failed: 400n, inFlight: 0n });
    assert.ok(exposure.oldestFailure && exposure.oldestFailure >= since);
  });

  test("the worst fees of a network's transactions still in flight are summed from the journal, every sender's, each replaced version through its replacement only", async () => {
    const since = new Date(Date.now() - 1000);
    const network = "solana:inflight";
    const send = (reference: string, worstFee?: bigint, replaces?: string) =>
      recorder.journal.recordSent(
        {
          network,
          reference,
          signer: reference.startsWith("a") ? "replica-a" : "replica-b",
          detail: {},
          ...(worstFee === undefined ? {} : { worstFee }),
          ...(replaces ? { replaces } : {}),
        },
        undefined,
      );
    await send("a1", 5_000n);
    await send("b1", 20_000n);
    await send("a2", 1_000n);
    await send("a2-bumped", 3_000n, "a2");
    await send("keyless");
    await send("b-done", 40_000n);
    await recorder.journal.recordFinished("b-done", "reverted", 9n, 6_000n);
    const stored = await database.db
      .selectFrom("settlement_transactions")
      .select(["reference", "worst_fee"])
      .where("network", "=", network)
      .orderBy("reference")
      .execute();
    assert.deepEqual(
      stored.map((r) => [r.reference, r.worst_fee === null ? null : BigInt(r.worst_fee)]),
      [
        ["a1", 5_000n],
        ["a2", 1_000n],
        ["a2-bumped", 3_000n],
        ["b-done", 40_000n],
        ["b1", 20_000n],
        ["keyless", null],
      ],
    );
    const exposure = await recorder.journal.failedFeeExposure(network, since);
    assert.deepEqual([exposure.reverted, exposure.inFlight], [6_000n, 5_000n + 20_000n + 3_000n]);
    await recorder.journal.recordFinished("b1", "success", 10n, 5_000n);
    assert.equal((await recorder.journal.failedFeeExposure(network, since)).inFlight, 8_000n);
  });

  test("a verify's look-ups share one read that tells live rows and cooling payers apart", async () => {
    // 0xabc has a success on record; 0xdef has nothing.
    const paid = (await begin())!;
    await recorder.finish(
      paid,
      { success: true, transaction: "0xpaid", network: "eip155:8453" },
      Date.now(),
    );
    const failed = (await begin("hostile"))!;
    await recorder.finish(
      failed,
      { success: false, errorReason: "x", transaction: "", network: "eip155:8453" },
      Date.now(),
    );
    const failedAt = new Date(Date.now() - 60_000);
    await database.db
      .updateTable("settlements")
      .set({ transaction: "0xbad", failure_cause: "payer", finished_at: failedAt })
      .where("id", "=", failed)
      .execute();
    const pending = (await begin("settling"))!;
    const cooling = (payer: string, sinceMs: number) => ({
      network: "eip155:8453",
      payer,
      since: new Date(Date.now() - sinceMs),
    });
    const [settling, hot, cold, honest, unchecked] = await Promise.all([
      recorder.reads.lookUpLive("settling", cooling("0xABC", 3_600_000)),
      recorder.reads.lookUpLive("other-1", cooling("0xabc", 3_600_000)),
      recorder.reads.lookUpLive("other-2", cooling("0xAbC", 30_000)),
      recorder.reads.lookUpLive("other-3", cooling("0xdef", 3_600_000)),
      recorder.reads.lookUpLive("hostile"),
    ]);
    assert.equal(settling.row?.id, pending);
    assert.equal(settling.payerFailedAt?.getTime(), failedAt.getTime());
    assert.deepEqual(hot, { row: undefined, payerFailedAt: failedAt, payerKnown: true });
    assert.deepEqual(
      cold,
      { row: undefined, payerFailedAt: undefined, payerKnown: true },
      "failed before since",
    );
    assert.deepEqual(honest, { row: undefined, payerFailedAt: undefined, payerKnown: false });
    assert.deepEqual(
      unchecked,
      { row: undefined, payerFailedAt: undefined, payerKnown: undefined },
      "failed: not live",
    );
  });

  test("a mined transaction reported again is not rewritten", async () => {
    await recorder.journal.recordSent(
      { network: "eip155:8453", reference: "0xagain", signer: "0xabc", detail: { raw: "0x01" } },
      undefined,
    );
    const version = async () =>
      (
        await sql<{ v: string }>`select xmin::text as v from settlement_transactions
          where reference = '0xagain'`.execute(database.db)
      ).rows[0]!.v;
    await recorder.journal.recordFinished("0xagain", "success", 7n, 100n);
    const written = await version();
    // The reorg watch reports the same success on each pass.
    await recorder.journal.recordFinished("0xagain", "success", 7n, 100n);
    await recorder.journal.recordFinished("0xagain", "success", undefined, undefined);
    assert.equal(await version(), written, "no new row version");
    // A different block (a reorg re-landed it) is written.
    await recorder.journal.recordFinished("0xagain", "success", 8n, 100n);
    assert.notEqual(await version(), written);
    const row = await database.db
      .selectFrom("settlement_transactions")
      .select(["status", "block_number"])
      .where("reference", "=", "0xagain")
      .executeTakeFirstOrThrow();
    assert.deepEqual([row.status, String(row.block_number)], ["success", "8"]);
  });

  test("the reorg watch's read and its sweep are answered from their indexes, not by reading every settlement", async () => {
    // With sequential scans priced out, a plan still reads the whole table
    // only when no index can answer the statement.
    const planOf = (explain: (trx: Transaction<Database>) => Promise<Record<string, unknown>[]>) =>
      database.db.transaction().execute(async (trx) => {
        await sql`set local enable_seqscan = off`.execute(trx);
        return (await explain(trx)).map((r) => String(r["QUERY PLAN"])).join("\n");
      });
    const since = new Date(Date.now() - 60_000);
    const after = { finished_at: new Date(), id: "00000000-0000-0000-0000-000000000000" };
    const read = await planOf((trx) =>
      recentSuccessesQuery(trx, since, 200, after, ["eip155:8453", "solana:x"]).explain(),
    );
    assert.match(read, /settlements_recent_successes_idx/, read);
    assert.doesNotMatch(read, /Seq Scan/, read);
    const sweep = await planOf(
      async (trx) =>
        (await sql`explain ${dropSignedMaterialStatement(since)}`.execute(trx)).rows as Record<
          string,
          unknown
        >[],
    );
    assert.match(sweep, /settlement_transactions_signed_idx/, sweep);
    assert.doesNotMatch(sweep, /Seq Scan on settlement_transactions/, sweep);
  });

  test("a verify's look-up says whether the payer has a settlement that succeeded on record", async () => {
    const since = new Date(Date.now() - 60_000);
    const network = "eip155:8453";
    const ask = (payer: string) =>
      recorder.reads.lookUpLive(`lookup-${++n}`, { network, payer, since });
    const fresh = "0x00000000000000000000000000000000000f7e57";
    assert.equal((await ask(fresh)).payerKnown, false);
    const id = (await recorder.begin({
      principal,
      request,
      authorizationKey: `known-${++n}`,
      payer: fresh,
      units: 1,
    }))!;
    assert.equal((await ask(fresh)).payerKnown, false, "a pending settle is no history");
    await recorder.finish(id, { success: true, transaction: "0xknown", network }, Date.now());
    assert.equal((await ask(fresh)).payerKnown, true);
    // More successes of the same payer, and look-ups of several payers in one
    // flush: each payer is answered for itself, once.
    for (const transaction of ["0xknown2", "0xknown3"]) {
      const more = (await recorder.begin({
        principal,
        request,
        authorizationKey: `known-${++n}`,
        payer: fresh,
        units: 1,
      }))!;
      await recorder.finish(more, { success: true, transaction, network }, Date.now());
    }
    const other = "0x00000000000000000000000000000000000f7e58";
    const together = await Promise.all([ask(fresh), ask(other), ask(fresh)]);
    assert.deepEqual(
      together.map((r) => r.payerKnown),
      [true, false, true],
    );
    assert.equal(
      (await recorder.reads.lookUpLive(`lookup-${++n}`)).payerKnown,
      undefined,
      "nothing read without a payer",
    );
  });

  test("a failure's cause journaled with its transaction decides, on any replica and for the reconciler, over a guess made later", async () => {
    const journal = new DbTransactionJournal(recorder.journal);
    const network = "eip155:8453";
    const causeOf = async (id: string) =>
      (
        await database.db
          .selectFrom("settlements")
          .select("failure_cause")
          .where("id", "=", id)
          .executeTakeFirstOrThrow()
      ).failure_cause;

    // The settle's own attribution, after the entry was written: the
    // journaled cause wins over what the family would now guess.
    const settled = (await begin())!;
    await recorder.journal.recordSent({ network, reference: "0xpayerfault", detail: {} }, settled);
    await journal.finished("0xpayerfault", "reverted", 5n, 1n, "payer");
    let asked = 0;
    await recorder.attributeFailure(settled, async () => (asked++, "requirements"));
    assert.equal(await causeOf(settled), "payer");
    assert.equal(asked, 0, "nobody guesses when the journal knows");

    // Without a journaled cause, the family is asked.
    const guessed = (await begin())!;
    await recorder.journal.recordSent({ network, reference: "0xnocause", detail: {} }, guessed);
    await journal.finished("0xnocause", "reverted", 5n, 1n);
    await recorder.attributeFailure(guessed, async () => "requirements");
    assert.equal(await causeOf(guessed), "requirements");

    // The reconciler (another replica, or after a restart) reads the journal
    // and an outcome without a cause of its own is decided by it.
    const reconciled = (await begin())!;
    await recorder.journal.recordSent({ network, reference: "0xlater", detail: {} }, reconciled);
    await journal.finished("0xlater", "reverted", 6n, 1n, "payer");
    const row = (await recorder.reads.get(reconciled))!;
    const pending = await recorder.journal.pendingSettlement(row);
    assert.equal(pending.transactions[0]?.cause, "payer");
    await recorder.finishFromChain(
      reconciled,
      { status: "failed", reason: "transfer_failed", message: "reverted", transaction: "0xlater" },
      pending.transactions,
    );
    assert.equal(await causeOf(reconciled), "payer");
  });
});

describe("settlement recorder's lanes", () => {
  test("a transaction's journal entry goes through the sending lane, with the settlement's reference", async () => {
    const { database, recorder, principal } = await openRecorderFixture("lanes");
    try {
      const id = await recorder.begin({
        principal,
        request,
        authorizationKey: "auth-lane",
        payer: "0xAbC",
        units: 1,
      });
      assert.ok(id);
      // New work's lane and the answers' lane reach nothing here: only the sending lane reaches the database.
      const newWork = new Kysely<Database>({
        dialect: {
          createAdapter: () => new PostgresAdapter(),
          createDriver: () => new DummyDriver(),
          createIntrospector: (db) => new PostgresIntrospector(db),
          createQueryCompiler: () => new PostgresQueryCompiler(),
        },
      });
      const lanes = new SettlementRecorder(
        newWork,
        createLogger("silent"),
        undefined,
        newWork,
        database.db,
      );
      await lanes.journal.recordSent(
        { network: "eip155:8453", reference: "0xlane", signer: "0xabc", detail: {} },
        id,
      );
      const row = await database.db
        .selectFrom("settlements as s")
        .innerJoin("settlement_transactions as t", "t.settlement_id", "s.id")
        .select(["s.transaction", "t.reference"])
        .where("s.id", "=", id)
        .executeTakeFirstOrThrow();
      assert.deepEqual(row, { transaction: "0xlane", reference: "0xlane" });
    } finally {
      await database.close();
    }
  });
});

describe("the chain's word on a settle's transaction", () => {
  test("inside a settle it is journaled by the outcome's own statement; outside, where it is called", async () => {
    const { database, recorder, principal } = await openRecorderFixture("word");
    try {
      const journal = new DbTransactionJournal(recorder.journal);
      const settlement = await Settlement.open(recorder, {
        principal,
        payment: {
          request,
          payer: "0xAbC",
          authorizationKey: "auth-word",
          units: 1,
          shapeError: undefined,
          replayReason: "replay",
          repeatable: false,
          family: undefined,
        },
        units: 1,
        requestId: "req-word",
      });
      assert.ok(settlement);
      const network = request.paymentRequirements.network;
      const entry = (reference: string) => ({ network, reference, signer: "0xabc", detail: {} });
      const statusOf = async (reference: string) =>
        (
          await database.db
            .selectFrom("settlement_transactions")
            .select("status")
            .where("reference", "=", reference)
            .executeTakeFirstOrThrow()
        ).status;

      await runInSettlementScope(settlement, async () => {
        await journal.sent(entry("0xword"));
        await journal.finished("0xword", "success", 7n, 21n);
      });
      assert.equal(settlement.notes.journalFinished?.length, 1, "left to the outcome's write");
      assert.equal(await statusOf("0xword"), "sent", "not written before the outcome");
      const written = await settlement.finish({
        success: true,
        transaction: "0xword",
        network,
        payer: "0xAbC",
      });
      assert.equal(written.successAnswered, true);
      // Written by the outcome's own statement: both, or neither.
      assert.equal(await statusOf("0xword"), "success");
      const mined = await database.db
        .selectFrom("settlement_transactions")
        .select(["block_number", "fee"])
        .where("reference", "=", "0xword")
        .executeTakeFirstOrThrow();
      assert.deepEqual(
        { block: String(mined.block_number), fee: String(mined.fee) },
        { block: "7", fee: "21" },
      );

      // Once the mechanism has ended, a transaction still followed in the
      // settle's scope (past a `settlement_pending` answer) is journaled
      // where it is decided: no outcome write would take it any more.
      assert.equal(settlement.notes.journalFinished, undefined);
      await runInSettlementScope(settlement, async () => {
        await journal.sent(entry("0xlate"));
        await journal.finished("0xlate", "success", 9n, 3n);
      });
      assert.equal(await statusOf("0xlate"), "success");

      // The reconciler and the reorg watch have no outcome write to wait with.
      await recorder.journal.recordSent(entry("0xalone"), undefined);
      await journal.finished("0xalone", "reverted", 8n, 5n);
      assert.equal(await statusOf("0xalone"), "reverted");
    } finally {
      await database.close();
    }
  });
});

describe("settlement recorder's journal reads", () => {
  test("concurrent reconciliations read their journals in one statement, each its own", async () => {
    let statements = 0;
    const traffic = { statement: () => void statements++, transactionControl: () => {} };
    const database = await openMigratedDb({ dataDir: "memory://", traffic });
    try {
      const recorder = new SettlementRecorder(database.db, createLogger("silent"));
      const account = await createAccount(database.db, "journals");
      const key = await createApiKey(database.db, account.id, "journals");
      const principal = { accountId: account.id, keyId: key.id, keyName: key.name };
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const id = (await recorder.begin({
          principal,
          request,
          authorizationKey: `journal-${i}`,
          payer: "0xabc",
          units: 1,
        }))!;
        ids.push(id);
        for (let t = 0; t <= i; t++) {
          await recorder.journal.recordSent(
            { network: "eip155:8453", reference: `0x${i}${t}`, signer: "0xabc", detail: { t } },
            id,
          );
        }
      }
      const rows = await Promise.all(ids.map((id) => recorder.reads.get(id)));
      const before = statements;
      const pending = await Promise.all(rows.map((r) => recorder.journal.pendingSettlement(r!)));
      assert.equal(statements - before, 1, "one read for the three");
      assert.deepEqual(
        pending.map((p) => p.transactions.map((t) => [t.reference, t.detail["t"]])),
        [
          [["0x00", 0]],
          [
            ["0x10", 0],
            ["0x11", 1],
          ],
          [
            ["0x20", 0],
            ["0x21", 1],
            ["0x22", 2],
          ],
        ],
      );
      assert.deepEqual(
        pending.map((p) => p.id),
        ids,
      );
    } finally {
      await database.close();
    }
  });
});
