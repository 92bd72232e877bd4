/**
 * The confidential daily batch is exactly once across replicas and across a
 * crash in the middle (spec 3.3, 8), on a controllable clock: two replicas
 * race for the same day and only one runs it; a replica that dies after the
 * chain closed the day but before recording it leaves a lease that runs
 * out, and the replica that resumes it credits nothing twice and records
 * every payment as available. A payment the vault collected whose
 * settlement is still pending holds the batch until the reconciler decides
 * it; then it is credited, with a receipt.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startStack, type TestStack } from "../support/stack.js";
import { availableBackends } from "../support/database.js";
import { paymentRequest, signPayment } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { until } from "../support/processes.js";
import {
  confidentialRequirements,
  enableWithNewWallet,
  pastNextMidnight,
} from "../chains/evm/confidential.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { DailyBatch } from "../../src/features/confidential/dailyBatch.js";
import { utcDay } from "../../src/features/confidential/credits.js";
import { createLogger } from "../../src/lib/logger.js";
import type { ConfidentialVault } from "../../src/features/confidential/vaultPort.js";

const LEASE_MS = 60_000;

for (const backend of availableBackends()) {
  describe(`confidential daily batch (${backend})`, () => {
    let stack: TestStack;

    before(async () => {
      stack = await startStack({ backend, confidential: true, confidentialWorker: false });
    });
    after(async () => stack?.stop());

    test("two replicas, one crash mid-batch: each slot credited once, every payment recorded", async () => {
      const { confidential, db } = stack.service;
      const vault = confidential.vault!;
      const account = await createAccount(db, "merchant");
      const apiKey = (await createApiKey(db, account.id, "k")).key;
      const { wallet, merchant } = await enableWithNewWallet(confidential.merchants, account.id);
      const requirements = confidentialRequirements({
        usdc: stack.usdc,
        vault: vault.address,
        merchant: wallet.address,
        amount: "2500",
      });
      for (const key of stack.payerKeys.slice(0, 2)) {
        const payload = await signPayment(key, requirements);
        const res = (await (
          await post(stack.url, "/settle", paymentRequest(requirements, payload.payload), apiKey)
        ).json()) as Record<string, unknown>;
        assert.equal(res["success"], true, JSON.stringify(res));
      }

      // Past the next 00:00 UTC, on the chain and on the replicas' clock.
      const now = await pastNextMidnight(stack.rpcUrl, vault);
      const day = utcDay(now) - 1;
      const log = createLogger("silent");

      // Replica A reaches the chain, which credits the slot, and dies before
      // it records anything.
      const dying: ConfidentialVault = Object.create(vault) as ConfidentialVault;
      dying.creditDay = async (args) => {
        await vault.creditDay(args);
        throw new Error("replica A was killed");
      };
      const credits = confidential.credits!;
      const a = new DailyBatch(db, dying, credits, { owner: "replica-a", leaseMs: LEASE_MS, log });
      const b = new DailyBatch(db, vault, credits, { owner: "replica-b", leaseMs: LEASE_MS, log });
      await assert.rejects(a.run(day, now), /killed/);
      assert.equal(await vault.balance(merchant.slot!), 5000n);

      // While A's lease holds, B does not touch the day.
      assert.deepEqual(await b.run(day, new Date(now.getTime() + 1_000)), {
        ran: false,
        day,
        why: "held",
      });
      const credited = await db
        .selectFrom("confidential_credits")
        .select("credited_day")
        .where("account_id", "=", account.id)
        .execute();
      assert.deepEqual(
        credited.map((c) => c.credited_day),
        [null, null],
      );

      // The lease runs out; B resumes A's plan: the chain skips the slot.
      const later = new Date(now.getTime() + LEASE_MS + 1_000);
      const resumed = await b.run(day, later);
      assert.equal(resumed.ran, true);
      assert.equal(await vault.balance(merchant.slot!), 5000n, "credited once");
      const rows = await db
        .selectFrom("confidential_credits")
        .select("credited_day")
        .where("account_id", "=", account.id)
        .execute();
      assert.deepEqual(
        rows.map((r) => r.credited_day),
        [day, day],
      );
      const batchRow = await db
        .selectFrom("confidential_batches")
        .select(["status", "owner", "credits", "total_amount"])
        .where("day", "=", day)
        .executeTakeFirstOrThrow();
      assert.deepEqual(batchRow, {
        status: "done",
        owner: "replica-b",
        credits: 2,
        total_amount: "5000",
      });
      // A restarted replica A finds the day done.
      assert.deepEqual(await a.run(day, later), { ran: false, day, why: "done" });
    });

    test("a batch that runs longer than its lease keeps it: another replica does not resume it meanwhile", async () => {
      const { confidential, db } = stack.service;
      const vault = confidential.vault!;
      const log = createLogger("silent");
      // A day far in the past with nothing in it, and a vault that takes
      // its time: the lease (2 s) must be renewed while the batch runs.
      const day = 1_000;
      const slow: ConfidentialVault = Object.create(vault) as ConfidentialVault;
      // An open day with something in its pool, so the batch goes on to
      // credit it (an empty pool is finished without sending anything).
      slow.dayInfo = async (d) => ({ ...(await vault.dayInfo(d)), phase: "open", pool: 1n });
      slow.dayPayments = async () => [];
      // Held open until the test has seen the lease outlive its first term.
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      slow.creditDay = async () => {
        await gate;
        return {
          txHashes: [],
          alreadyCredited: [],
          credited: [],
          total: 0n,
          returned: [],
          releasableAfter: null,
        };
      };
      const now = new Date();
      const a = new DailyBatch(db, slow, confidential.credits!, {
        owner: "replica-slow",
        leaseMs: 2_000,
        log,
      });
      const b = new DailyBatch(db, vault, confidential.credits!, {
        owner: "replica-eager",
        leaseMs: 2_000,
        log,
      });
      const running = a.run(day, now);
      const firstTerm = now.getTime() + 2_000;
      await until("the lease renewed past its first term", async () => {
        const row = await db
          .selectFrom("confidential_batches")
          .select("lease_until")
          .where("day", "=", day)
          .executeTakeFirst();
        return row && new Date(row.lease_until!).getTime() > firstTerm + 500;
      });
      // After the first term: without the renewal the other replica would take it.
      assert.deepEqual(await b.run(day, new Date(firstTerm + 100)), {
        ran: false,
        day,
        why: "held",
      });
      release();
      assert.equal((await running).ran, true);
    });
  });
}

// Its own chain: the test above moved the first one's clock a day ahead of
// the payments' wall-clock validity.
describe("confidential daily batch and a payment still settling", () => {
  let stack: TestStack;

  before(async () => {
    stack = await startStack({ confidential: true, confidentialWorker: false });
  });
  after(async () => stack?.stop());

  test("a collected payment whose settlement is still pending holds the batch; once reconciled it is credited, with its receipt", async () => {
    const { confidential, db } = stack.service;
    const vault = confidential.vault!;
    const account = await createAccount(db, "late merchant");
    const apiKey = (await createApiKey(db, account.id, "k")).key;
    const { wallet, merchant } = await enableWithNewWallet(confidential.merchants, account.id);
    const requirements = confidentialRequirements({
      usdc: stack.usdc,
      vault: vault.address,
      merchant: wallet.address,
      amount: "700",
    });
    const payload = await signPayment(stack.payerKeys[2]!, requirements);
    const res = (await (
      await post(stack.url, "/settle", paymentRequest(requirements, payload.payload), apiKey)
    ).json()) as Record<string, unknown>;
    assert.equal(res["success"], true, JSON.stringify(res));
    // As if the process had died after the collect landed and before its
    // outcome (and so its credit) was recorded: the reconciler's to decide.
    await db.deleteFrom("confidential_credits").where("account_id", "=", account.id).execute();
    const settlement = () =>
      db
        .updateTable("settlements")
        .where("account_id", "=", account.id)
        .where("status", "in", ["pending", "succeeded"]);
    await settlement().set({ status: "pending" }).execute();

    const now = await pastNextMidnight(stack.rpcUrl, vault);
    const day = utcDay(now) - 1;
    const batch = new DailyBatch(db, vault, confidential.credits!, {
      owner: "replica-c",
      leaseMs: LEASE_MS,
      log: createLogger("silent"),
    });
    assert.deepEqual(await batch.run(day, now), { ran: false, day, why: "settling" });
    assert.equal(
      (await vault.dayInfo(day)).returned,
      0n,
      "a payment still settling is not returned",
    );
    assert.equal(await vault.balance(merchant.slot!), 0n, "nothing credited meanwhile");

    // The reconciler finds the transfer landed.
    await settlement().set({ status: "succeeded" }).execute();
    const ran = await batch.run(day, new Date(now.getTime() + 30_000));
    assert.equal(ran.ran, true);
    assert.equal(await vault.balance(merchant.slot!), 700n, "the late payment is in the batch");
    const [credit] = await db
      .selectFrom("confidential_credits")
      .select(["credited_day", "receipt", "day"])
      .where("account_id", "=", account.id)
      .execute();
    assert.equal(credit!.credited_day, day);
    assert.equal(credit!.day, day);
    const receipt = credit!.receipt as { slot?: string; amount?: string } | null;
    assert.deepEqual(
      [receipt?.slot, receipt?.amount],
      [merchant.slot!.toString(), "700"],
      "its receipt: the opening of its commitment to the merchant's slot",
    );
  });
});
