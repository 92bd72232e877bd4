/**
 * payment-identifier on its own (no HTTP): one execution per (key, id), a
 * bound success replays verbatim without executing, a different payment
 * under the same id is a conflict, a failure frees the id, and ids are
 * scoped per API key.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { SettleResponse } from "@x402/core/types";
import { openMigratedDb, type OpenedDb } from "../../storage/db.js";
import { ServiceError } from "../../lib/errors.js";
import { createAccount } from "../accounts/accounts.js";
import { createApiKey } from "../keys/apiKeys.js";
import { PaymentIdentifierStore } from "./paymentIdentifiers.js";

const OK: SettleResponse = { success: true, transaction: "0xaa", network: "eip155:8453" };
const FAIL: SettleResponse = {
  success: false,
  errorReason: "insufficient_funds",
  transaction: "",
  network: "eip155:8453",
};

describe("payment identifiers", () => {
  let database: OpenedDb;
  let store: PaymentIdentifierStore;
  let keyA: string;
  let keyB: string;
  before(async () => {
    database = await openMigratedDb({ dataDir: "memory://" });
    store = new PaymentIdentifierStore(database.db, { pollMs: 10, maxWaitMs: 2_000 });
    const account = await createAccount(database.db, "ids");
    keyA = (await createApiKey(database.db, account.id, "a")).id;
    keyB = (await createApiKey(database.db, account.id, "b")).id;
  });
  after(() => database.close());

  test("concurrent duplicates execute once and share the answer; a later replay does not execute", async () => {
    let runs = 0;
    const execute = async () => {
      runs++;
      await new Promise((r) => setImmediate(r));
      return OK;
    };
    const answers = await Promise.all(
      Array.from({ length: 10 }, () =>
        store.settleOnce(keyA, "pay_0000000000000001", "fp1", execute),
      ),
    );
    assert.equal(runs, 1);
    assert.ok(answers.every((a) => JSON.stringify(a) === JSON.stringify(OK)));
    assert.deepEqual(await store.settleOnce(keyA, "pay_0000000000000001", "fp1", execute), OK);
    assert.equal(runs, 1, "replayed, not executed");
  });

  test("the same id with a different payment is a 409 conflict", async () => {
    await store.settleOnce(keyA, "pay_0000000000000002", "fp2", async () => OK);
    await assert.rejects(
      store.settleOnce(keyA, "pay_0000000000000002", "other", async () => OK),
      (e: unknown) => e instanceof ServiceError && e.code === "payment_identifier_conflict",
    );
  });

  test("a failure frees the id: the retry executes again", async () => {
    let runs = 0;
    assert.deepEqual(
      await store.settleOnce(keyA, "pay_0000000000000003", "fp3", async () => (runs++, FAIL)),
      FAIL,
    );
    assert.deepEqual(
      await store.settleOnce(keyA, "pay_0000000000000003", "fp3", async () => (runs++, OK)),
      OK,
    );
    assert.equal(runs, 2);
  });

  test("ids are scoped per API key", async () => {
    let runs = 0;
    await store.settleOnce(keyA, "pay_0000000000000004", "fp4", async () => (runs++, OK));
    await store.settleOnce(keyB, "pay_0000000000000004", "fp4", async () => (runs++, OK));
    assert.equal(runs, 2);
  });
});
