/**
 * The payer-cooling stage against the settlements it reads (PGlite): a payer
 * whose payment failed on-chain by its own doing is refused before anything
 * is sent, except for a retry of a payment already on record, which the
 * intent stage answers from that record.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { openMigratedDb, type OpenedDb } from "../../../storage/db.js";
import { createLogger } from "../../../lib/logger.js";
import type { PaymentRequest } from "../../../protocol/index.js";
import { createAccount } from "../../accounts/accounts.js";
import { createApiKey } from "../../keys/apiKeys.js";
import { SettlementRecorder } from "../../settlements/settlementRecorder.js";
import type { SettleContext } from "./pipeline.js";
import { payerCoolingStage } from "./payerCoolingStage.js";

const PAYER = "0x00000000000000000000000000000000000c0011";
const request = {
  x402Version: 2,
  paymentPayload: { x402Version: 2, payload: { n: 1 } },
  paymentRequirements: {
    scheme: "exact",
    network: "eip155:8453",
    asset: "0x2222222222222222222222222222222222222222",
    amount: "5",
    payTo: "0x3333333333333333333333333333333333333333",
  },
} as unknown as PaymentRequest;

describe("payer cooling", () => {
  let database: OpenedDb;
  let recorder: SettlementRecorder;
  let principal: { accountId: string; keyId: string; keyName: string };
  before(async () => {
    database = await openMigratedDb({ dataDir: "memory://" });
    recorder = new SettlementRecorder(database.db, createLogger("silent"));
    const account = await createAccount(database.db, "cooling");
    const key = await createApiKey(database.db, account.id, "cooling");
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
    await recorder.begin({ principal, request, authorizationKey: "sent", payer: PAYER, units: 1 });
  });
  after(() => database.close());

  const run = (authorizationKey: string) =>
    payerCoolingStage(recorder, 3_600_000).run(
      { request, payment: { payer: PAYER, authorizationKey } } as unknown as SettleContext,
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
