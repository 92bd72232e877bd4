/**
 * A copy of a payment whose own settle in this process ended by throwing
 * (an outage answered 503 after something was sent): nothing of that settle
 * runs any more, so the copy asks the chain at once and gets its outcome,
 * instead of waiting for an owner that is gone and being told "pending".
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import type { OpenedDb } from "../../storage/db.js";
import { createLogger } from "../../lib/logger.js";
import type { PendingSettlement, RoutedPayment } from "../../chains/ports.js";
import type { SettlementRecorder } from "../settlements/settlementRecorder.js";
import { DuplicateSettles } from "./duplicates.js";
import type { PaymentEngine } from "./engine.js";
import type { SettleContext } from "./stages/pipeline.js";
import { SAMPLE_REQUEST, openRecorderFixture } from "../../../test/support/recorder.js";

const request = SAMPLE_REQUEST;

let database: OpenedDb;
let recorder: SettlementRecorder;
let principal: { accountId: string; keyId: string; keyName: string };
before(async () => {
  ({ database, recorder, principal } = await openRecorderFixture("abandoned"));
});
after(() => database.close());

test("a copy of a payment whose settle here threw asks the chain at once and gets the success", async () => {
  const asked: PendingSettlement[] = [];
  // The chain's word, as a family's reconcile gives it: the transaction landed.
  const engine = {
    reconcile: (pending: PendingSettlement) => {
      asked.push(pending);
      return Promise.resolve({ status: "succeeded", transaction: "0xfeed" } as const);
    },
  } as unknown as PaymentEngine;
  const duplicates = new DuplicateSettles(engine, recorder, createLogger("silent"), {
    // Long enough that a copy waiting for the owner would be answered pending.
    waitMs: 30_000,
    ownerGoneAfterMs: 90_000,
    pollMs: 10,
  });
  const payment = {
    request,
    payer: "0x00000000000000000000000000000000000a0001",
    authorizationKey: "abandoned-1",
    units: 1,
    shapeError: undefined,
    replayReason: "duplicate_settlement",
    repeatable: false,
    family: undefined,
  } as RoutedPayment;
  const id = await recorder.begin({
    principal,
    request,
    authorizationKey: payment.authorizationKey,
    payer: payment.payer,
    units: 1,
  });
  assert.ok(id);
  await assert.rejects(
    duplicates.own(id, Promise.reject(new Error("the outcome is not known yet"))),
  );

  const row = await recorder.reads.findLive(payment.authorizationKey);
  assert.equal(row?.status, "pending", "the settle that threw left its record open");
  const ctx = {
    principal,
    request,
    payment,
    requestId: "retry-1",
    extensionResponses: {},
    units: 1,
  } as SettleContext;
  const answer = await duplicates.answer(ctx, row!);
  assert.equal(answer?.success, true, JSON.stringify(answer));
  assert.equal(answer?.transaction, "0xfeed");
  assert.equal(asked.length, 1, "the chain was asked once");
  const recorded = await recorder.reads.get(id);
  assert.equal(recorded?.status, "succeeded");
});
