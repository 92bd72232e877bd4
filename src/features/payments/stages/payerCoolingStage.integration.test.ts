/**
 * The payer-cooling stage against the settlements it reads (PGlite): a payer
 * whose payment failed on-chain by its own doing is refused before anything
 * is sent, except for a retry of a payment already on record, which the
 * intent stage answers from that record.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { OpenedDb } from "../../../storage/db.js";
import type { SettlementRecorder } from "../../settlements/settlementRecorder.js";
import type { SettleContext } from "./pipeline.js";
import { payerCoolingStage } from "./payerCoolingStage.js";
import { SAMPLE_REQUEST, openRecorderFixture } from "../../../../test/support/recorder.js";

const PAYER = "0x00000000000000000000000000000000000c0011";
const request = SAMPLE_REQUEST;

describe("payer cooling", () => {
  let database: OpenedDb;
  let recorder: SettlementRecorder;
  let principal: { accountId: string; keyId: string; keyName: string };
  before(async () => {
    ({ database, recorder, principal } = await openRecorderFixture("cooling"));
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
    await recorder.begin({ principal, request, authorizationKey: "sent", payer: PAYER, units: 1 });
  });
  after(() => database.close());

  const run = (authorizationKey: string) =>
    payerCoolingStage(recorder, 3_600_000).run(
      {
        request,
        payment: { payer: PAYER, authorizationKey },
        payer: {},
      } as unknown as SettleContext,
      () => Promise.resolve({ success: true, transaction: "0xnext" } as never),
    );

  test("a new payment from the cooling payer is refused before anything is sent", async () => {
    const answer = await run("new");
    assert.equal(answer.success, false);
    assert.equal(answer.errorReason, "payer_failed_onchain_recently");
    assert.match(answer.errorMessage ?? "", /Nothing was sent/);
  });

  test("a retry of the payer's payment already on record goes on to be answered from its record", async () => {
    const answer = await run("sent");
    assert.deepEqual(answer, { success: true, transaction: "0xnext" });
  });
});
