/**
 * Payer cooling in the intent stage, against the settlements its statement
 * reads (PGlite, and PostgreSQL when available): a payer whose payment
 * failed on-chain by its own doing gets no row and is refused before
 * anything is sent, except for a retry of a payment already on record,
 * which that record answers; an honest payer's row is written in the same
 * statement that read its history, and its settlement knows whether the
 * payer has a success on record.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { OpenedDb } from "../../../storage/db.js";
import { SettlementRecorder } from "../../settlements/settlementRecorder.js";
import type { Settlement } from "../../settlements/settlement.js";
import type { DuplicateSettles } from "../duplicates.js";
import type { SettleContext } from "./pipeline.js";
import { intentStage } from "./intentStage.js";
import { createLogger } from "../../../lib/logger.js";
import { createAccount } from "../../accounts/accounts.js";
import { createApiKey } from "../../keys/apiKeys.js";
import { SAMPLE_REQUEST } from "../../../../test/support/recorder.js";
import { availableBackends, openTestDb } from "../../../../test/support/database.js";

const PAYER = "0x00000000000000000000000000000000000c0011";
const KNOWN = "0x00000000000000000000000000000000000c0022";
const NEW_PAYER = "0x00000000000000000000000000000000000c0033";
const request = SAMPLE_REQUEST;
const network = request.paymentRequirements.network;

/** What the record of a payment on record answers (the duplicate path), told apart from a send. */
const FROM_RECORD = { success: true, transaction: "0xrecord", network } as const;
const duplicates = {
  own: (_id: string, answer: Promise<unknown>) => answer,
  answer: () => Promise.resolve(FROM_RECORD),
} as unknown as DuplicateSettles;

for (const backend of availableBackends()) {
  describe(`payer cooling (${backend})`, () => {
    let database: OpenedDb;
    let recorder: SettlementRecorder;
    let principal: { accountId: string; keyId: string; keyName: string };
    before(async () => {
      database = await openTestDb(backend);
      recorder = new SettlementRecorder(database.db, createLogger("silent"));
      const account = await createAccount(database.db, "cooling");
      const key = await createApiKey(database.db, account.id, "cooling-key");
      principal = { accountId: account.id, keyId: key.id, keyName: key.name };
      // One payment of the payer's failed on-chain by the payer's doing...
      const failed = await recorder.begin({
        principal,
        request,
        authorizationKey: "failed",
        payer: PAYER,
        units: 1,
      });
      await database.db
        .updateTable("settlements")
        .set({
          status: "failed",
          transaction: "0x01",
          failure_cause: "payer",
          finished_at: new Date(),
        })
        .where("id", "=", failed!)
        .execute();
      // ...while another, sent before, is still pending.
      await recorder.begin({
        principal,
        request,
        authorizationKey: "sent",
        payer: PAYER,
        units: 1,
      });
      // Another payer has a payment that succeeded.
      const settled = await recorder.begin({
        principal,
        request,
        authorizationKey: "settled",
        payer: KNOWN,
        units: 1,
      });
      await recorder.finish(settled!, { success: true, transaction: "0x02", network }, Date.now());
    });
    after(() => database.close());

    /** The intent stage for a payment of `payer`; what it answered, and the settlement it opened. */
    async function run(payer: string, authorizationKey: string) {
      let opened: Settlement | undefined;
      const answer = await intentStage(recorder, duplicates, 3_600_000).run(
        {
          principal,
          request,
          payment: { request, payer, authorizationKey, repeatable: false },
          units: 1,
          requestId: `req-${authorizationKey}`,
        } as unknown as SettleContext,
        (settlement) => {
          opened = settlement;
          return Promise.resolve({ success: true, transaction: "0xsent", network });
        },
      );
      return { answer, opened };
    }

    const rowsOf = async (authorizationKey: string) =>
      (
        await database.db
          .selectFrom("settlements")
          .select("id")
          .where("authorization_key", "=", authorizationKey)
          .execute()
      ).length;

    test("a new payment from the cooling payer is refused before any row is written or anything sent", async () => {
      const { answer, opened } = await run(PAYER, "new");
      assert.equal(answer.success, false);
      assert.equal(answer.errorReason, "payer_failed_onchain_recently");
      assert.match(answer.errorMessage ?? "", /Nothing was sent/);
      assert.equal(opened, undefined);
      assert.equal(await rowsOf("new"), 0);
    });

    test("a retry of the cooling payer's payment already on record is answered from its record", async () => {
      const { answer, opened } = await run(PAYER, "sent");
      assert.deepEqual(answer, FROM_RECORD);
      assert.equal(opened, undefined);
    });

    test("honest payers' payments are written, each settlement knowing whether its payer has a success on record", async () => {
      const [known, fresh] = await Promise.all([run(KNOWN, "known-2"), run(NEW_PAYER, "new-2")]);
      assert.equal(known.answer.transaction, "0xsent");
      assert.equal(fresh.answer.transaction, "0xsent");
      assert.equal(known.opened?.payerKnown, true);
      assert.equal(fresh.opened?.payerKnown, false);
      assert.equal(await rowsOf("known-2"), 1);
      assert.equal(await rowsOf("new-2"), 1);
      // Written as the plain insert writes a row (the failed one above):
      // the request as a document, the defaults of the columns not named.
      const columns = ["status", "payer", "amount", "request", "attempts", "billed"] as const;
      const written = await database.db
        .selectFrom("settlements")
        .select([...columns, "started_at"])
        .where("authorization_key", "in", ["new-2", "sent"])
        .orderBy("authorization_key")
        .execute();
      const [checked, plain] = written;
      assert.deepEqual(
        { ...checked!, payer: undefined, started_at: undefined },
        { ...plain!, payer: undefined, started_at: undefined },
      );
      assert.equal(checked!.payer, NEW_PAYER);
      assert.ok(new Date(checked!.started_at).getTime() > Date.now() - 60_000);
    });

    test("two payments of one authorization in one flush: the first listed is written, the other meets its record", async () => {
      const [first, second] = await Promise.all([run(NEW_PAYER, "twice"), run(NEW_PAYER, "twice")]);
      assert.deepEqual([first.answer.transaction, second.answer.transaction].sort(), [
        "0xrecord",
        "0xsent",
      ]);
      assert.equal(await rowsOf("twice"), 1);
    });
  });
}
