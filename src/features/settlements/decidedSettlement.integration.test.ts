/**
 * A settle slower than the reconciler's horizon races the reconciler for
 * its row. Whoever comes first, the record and the chain must agree:
 * - the reconciler judged "nothing was sent" first: the settle's send is
 *   refused by the journal and never broadcast;
 * - the settle journaled its send first: the reconciler's judgement, made
 *   on the journal as it was before, is not written.
 * And a success recorded by a write whose acknowledgement was lost is still
 * that request's to answer when the write is tried again.
 *
 * Run on PGlite and, when TEST_DATABASE_URL is set, on PostgreSQL, where
 * the two writers run on separate connections at once.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createLogger } from "../../lib/logger.js";
import { createAccount } from "../accounts/accounts.js";
import { createApiKey } from "../keys/apiKeys.js";
import { nothingWasSent } from "../../chains/familySupport.js";
import type { JournalEntry } from "../../chains/ports.js";
import { SettlementDecidedError } from "./journalRecords.js";
import { SettlementRecorder, type ChainOutcome } from "./settlementRecorder.js";
import { SAMPLE_REQUEST } from "../../../test/support/recorder.js";
import { availableBackends, openTestDb } from "../../../test/support/database.js";

const request = SAMPLE_REQUEST;

/** The reconciler's judgement of a pending row with an empty journal. */
function interrupted(): ChainOutcome {
  const outcome = nothingWasSent();
  assert.ok(outcome.status === "failed");
  return outcome;
}
const network = request.paymentRequirements.network;

for (const backend of availableBackends()) {
  describe(`a settle that outlives the reconciler's horizon (${backend})`, () => {
    let database: Awaited<ReturnType<typeof openTestDb>>;
    let recorder: SettlementRecorder;
    let principal: { accountId: string; keyId: string; keyName: string };
    let n = 0;
    before(async () => {
      database = await openTestDb(backend);
      recorder = new SettlementRecorder(database.db, createLogger("silent"));
      const account = await createAccount(database.db, `decided-${backend}`);
      const key = await createApiKey(database.db, account.id, "k");
      principal = { accountId: account.id, keyId: key.id, keyName: key.name };
    });
    after(() => database.close());

    const begin = async () => {
      const id = await recorder.begin({
        principal,
        request,
        authorizationKey: `decided-${++n}`,
        payer: "0xAbC",
        units: 1,
      });
      assert.ok(id);
      return id;
    };
    const entry = (reference: string, replaces?: string): JournalEntry => ({
      network,
      reference,
      signer: "0xabc",
      ...(replaces ? { replaces } : {}),
      detail: { raw: "0x01" },
    });
    const journalOf = async (id: string) =>
      (
        await database.db
          .selectFrom("settlement_transactions")
          .select("reference")
          .where("settlement_id", "=", id)
          .orderBy("created_at")
          .execute()
      ).map((r) => r.reference);

    test("the reconciler first: the settle's send is refused and nothing of it is journaled", async () => {
      const id = await begin();
      const read = await recorder.journal.pendingSettlement((await recorder.reads.get(id))!);
      const decided = await recorder.finishFromChain(id, interrupted(), read.transactions);
      assert.equal(decided?.status, "failed");
      await assert.rejects(
        recorder.journal.recordSent(entry(`0xlate-${id}`), id),
        (e: unknown) => e instanceof SettlementDecidedError && e.settlementId === id,
      );
      assert.deepEqual(await journalOf(id), []);
      const row = (await recorder.reads.get(id))!;
      assert.deepEqual([row.status, row.transaction], ["failed", null]);
    });

    test("the settle first: a judgement made on the journal before its send is not written", async () => {
      const id = await begin();
      const read = await recorder.journal.pendingSettlement((await recorder.reads.get(id))!);
      await recorder.journal.recordSent(entry(`0xsent-${id}`), id);
      assert.equal(await recorder.finishFromChain(id, interrupted(), read.transactions), undefined);
      const row = (await recorder.reads.get(id))!;
      assert.deepEqual([row.status, row.transaction], ["pending", `0xsent-${id}`]);
      // Judged again on the journal as it now is, the outcome is written.
      const again = await recorder.journal.pendingSettlement(row);
      const moved = await recorder.finishFromChain(
        id,
        { status: "succeeded", transaction: `0xsent-${id}` },
        again.transactions,
      );
      assert.equal(moved?.status, "succeeded");
    });

    test("a fee bump journaled after the read also voids the judgement", async () => {
      const id = await begin();
      await recorder.journal.recordSent(entry(`0xfirst-${id}`), id);
      const read = await recorder.journal.pendingSettlement((await recorder.reads.get(id))!);
      await recorder.journal.recordSent(entry(`0xbump-${id}`, `0xfirst-${id}`), id);
      const stale = { status: "failed", reason: "x", message: "superseded" } as const;
      assert.equal(await recorder.finishFromChain(id, stale, read.transactions), undefined);
      assert.equal((await recorder.reads.get(id))!.status, "pending");
      assert.deepEqual(await journalOf(id), [`0xfirst-${id}`, `0xbump-${id}`]);
    });

    test("a success still takes a re-send (a reorg's), and one re-sent by another replica is not revoked", async () => {
      const id = await begin();
      await recorder.journal.recordSent(entry(`0xpaid-${id}`), id);
      await recorder.finish(
        id,
        { success: true, transaction: `0xpaid-${id}`, network } as never,
        Date.now(),
      );
      const read = await recorder.journal.pendingSettlement((await recorder.reads.get(id))!);
      await recorder.journal.recordSent(entry(`0xrelanded-${id}`), id);
      const outcome = { reason: "settlement_interrupted", message: "cannot land" };
      assert.equal(await recorder.revokeSuccess(id, outcome, read.transactions), undefined);
      assert.equal((await recorder.reads.get(id))!.status, "succeeded");
      const now = await recorder.journal.pendingSettlement((await recorder.reads.get(id))!);
      assert.equal((await recorder.revokeSuccess(id, outcome, now.transactions))?.status, "failed");
    });

    test("a success written again by the request that holds it is still its answer; another request's is not", async () => {
      const id = await begin();
      const paid = { success: true, transaction: `0xok-${id}`, network } as never;
      const first = await recorder.finish(id, paid, Date.now(), "req-a");
      assert.deepEqual(first, { recorded: true, successAnswered: true });
      // The same write tried again (its first commit's acknowledgement lost).
      assert.deepEqual(await recorder.finish(id, paid, Date.now(), "req-a"), first);
      assert.deepEqual(await recorder.finish(id, paid, Date.now(), "req-b"), {
        recorded: true,
        successAnswered: false,
      });
      assert.equal((await recorder.reads.get(id))!.success_request_id, "req-a");
    });

    test("a failure decided from the chain keeps who caused it: a payer's is named, one the chain did not attribute stays unnamed", async () => {
      const causeOf = async (id: string) =>
        (
          await database.db
            .selectFrom("settlements")
            .select("failure_cause")
            .where("id", "=", id)
            .executeTakeFirstOrThrow()
        ).failure_cause;
      const [byPayer, unattributed] = [await begin(), await begin()];
      for (const id of [byPayer, unattributed])
        await recorder.journal.recordSent(entry(`0xtx-${id}`), id);
      const judged = async (id: string, outcome: ChainOutcome) => {
        const read = await recorder.journal.pendingSettlement((await recorder.reads.get(id))!);
        return recorder.finishFromChain(id, outcome, read.transactions);
      };
      const failed = {
        status: "failed",
        reason: "insufficient_funds",
        message: "moved away",
      } as const;
      assert.equal((await judged(byPayer, { ...failed, cause: "payer" }))?.status, "failed");
      assert.equal((await judged(unattributed, failed))?.status, "failed");
      assert.equal(await causeOf(byPayer), "payer");
      assert.equal(await causeOf(unattributed), null);
    });

    test("raced at once, each row ends one way: sent and still open, or failed with nothing sent", async () => {
      const ids = await Promise.all(Array.from({ length: 40 }, () => begin()));
      const reads = await Promise.all(
        ids.map(async (id) => recorder.journal.pendingSettlement((await recorder.reads.get(id))!)),
      );
      const sends = await Promise.all(
        ids.map((id, i) =>
          Promise.all([
            recorder.journal.recordSent(entry(`0xrace-${id}`), id).then(
              () => "sent" as const,
              (e: unknown) => {
                if (e instanceof SettlementDecidedError) return "refused" as const;
                throw e;
              },
            ),
            recorder.finishFromChain(id, interrupted(), reads[i]!.transactions),
          ]),
        ),
      );
      for (const [i, id] of ids.entries()) {
        const [send, decided] = sends[i]!;
        const row = (await recorder.reads.get(id))!;
        const journal = await journalOf(id);
        if (send === "sent") {
          assert.equal(decided, undefined, `${id}: judged failed after its send was journaled`);
          assert.deepEqual(
            [row.status, row.transaction, journal],
            ["pending", journal[0], [`0xrace-${id}`]],
          );
        } else {
          assert.equal(decided?.status, "failed");
          assert.deepEqual([row.status, row.transaction, journal], ["failed", null, []]);
        }
      }
    });
  });
}
