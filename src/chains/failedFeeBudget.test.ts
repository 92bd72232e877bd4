/**
 * The hourly failed-fee budget: reverted fees and in-flight worst cases add
 * up against it; a transaction that would pass it is refused; failures age
 * out after an hour, and a transaction that succeeded gives its hold back;
 * the failures and the transactions in flight every replica journaled count
 * too.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  FailedFeeBudget,
  FailedFeeBudgetSpentError,
  type FailedFeeExposure,
} from "./failedFeeBudget.js";

test("in-flight holds and reverted fees count; success gives the hold back; failures age out", () => {
  let now = 1_000_000;
  const budget = new FailedFeeBudget("eip155:8453", 1_000n, () => now);
  const a = budget.reserve(600n);
  // A second in flight would pass the budget before either is known to fail.
  assert.throws(() => budget.reserve(500n), FailedFeeBudgetSpentError);
  budget.finish(a, false, 300n); // succeeded: nothing counts
  const b = budget.reserve(600n);
  budget.finish(b, true, 700n); // reverted: its fee counts for the hour
  assert.equal(budget.spent(), 700n);
  assert.throws(
    () => budget.reserve(400n),
    (e) => e instanceof FailedFeeBudgetSpentError && e.retryAfterSeconds === 3600,
  );
  budget.finish(budget.reserve(300n), false, 0n);
  now += 60 * 60 * 1000;
  assert.equal(budget.spent(), 0n, "an hour later the failure no longer counts");
  budget.reserve(1_000n);
});

test("no budget: nothing is refused", () => {
  const budget = new FailedFeeBudget("eip155:8453", undefined);
  budget.reserve(10n ** 30n);
  budget.reserve(10n ** 30n);
});

test("the failures every replica journaled count, read at start; this process's own count where it is higher", async () => {
  const now = 1_000_000;
  let journaled = 900n;
  const asked: Date[] = [];
  const budget = new FailedFeeBudget(
    "eip155:8453",
    1_000n,
    () => now,
    (since) => {
      asked.push(since);
      return Promise.resolve({ reverted: journaled, inFlight: 0n });
    },
  );
  await budget.refresh();
  assert.equal(asked[0]?.getTime(), now - 60 * 60 * 1000, "the hour before now");
  assert.equal(budget.spent(), 900n, "another replica's failures count here");
  assert.throws(() => budget.reserve(200n), FailedFeeBudgetSpentError);
  budget.finish(budget.reserve(50n), false, 0n);

  // This process's failure, before the journal's figure has seen it.
  journaled = 0n;
  await budget.refresh();
  budget.finish(budget.reserve(100n), true, 950n);
  assert.equal(budget.spent(), 950n);
  assert.throws(() => budget.reserve(100n), FailedFeeBudgetSpentError);

  // A failed read keeps the last figure.
  const failing = new FailedFeeBudget(
    "eip155:8453",
    1_000n,
    () => now,
    () => Promise.reject(new Error("database down")),
  );
  await failing.refresh();
  assert.equal(failing.spent(), 0n);
});

test("two processes' transactions in flight count together: each sees the other's through the journal, and its own before the journal does", async () => {
  let now = 1_000_000;
  // The journal both processes write: the worst fees of what is in flight.
  const journal = new Map<string, bigint>();
  const read = (): Promise<FailedFeeExposure> =>
    Promise.resolve({
      reverted: 0n,
      inFlight: [...journal.values()].reduce((a, b) => a + b, 0n),
    });
  const a = new FailedFeeBudget("solana:x", 1_000n, () => now, read);
  const b = new FailedFeeBudget("solana:x", 1_000n, () => now, read);
  await Promise.all([a.refresh(), b.refresh()]);

  // A sends 600 and journals it.
  const sentByA = a.reserve(600n);
  journal.set("a1", 600n);
  now += 1;
  a.journaled(sentByA);
  assert.equal(a.inFlight(), 600n, "its own, before a read has seen it");
  // B has not read since: it could still send 600 (the gap a refresh bounds)...
  assert.equal(b.inFlight(), 0n);
  // ...but once it has read, A's transaction counts there.
  now += 6_000;
  await b.refresh();
  assert.equal(b.inFlight(), 600n, "the other process's transaction in flight");
  assert.throws(() => b.reserve(500n), FailedFeeBudgetSpentError);
  const sentByB = b.reserve(400n);
  journal.set("b1", 400n);
  now += 1;
  b.journaled(sentByB);
  assert.equal(b.inFlight(), 1_000n, "the journal's 600 and its own 400, not counted twice");

  // A reads again: its own transaction is in the journal's figure, counted once.
  now += 1;
  await a.refresh();
  assert.equal(a.inFlight(), 1_000n);
  assert.throws(() => a.reserve(1n), FailedFeeBudgetSpentError);

  // B's transaction landed: once the journal says so, A may send again.
  b.finish(sentByB, false, 0n);
  journal.delete("b1");
  now += 1;
  await a.refresh();
  assert.equal(a.inFlight(), 600n);
  a.finish(a.reserve(400n), false, 0n);
});

test("one account's failures and sends in flight may use only its share: another account still settles", () => {
  let now = 1_000_000;
  const budget = new FailedFeeBudget("eip155:137", 1_000n, () => now);
  // The attacker's account fails three times at 80 each (240 of its 250).
  for (let i = 0; i < 3; i++) budget.finish(budget.reserve(80n, "attacker"), true, 80n);
  assert.throws(
    () => budget.reserve(80n, "attacker"),
    (e) =>
      e instanceof FailedFeeBudgetSpentError &&
      e.scope === "account" &&
      /this account's settlements/.test(e.message),
  );
  // The network's pool is far from spent: an honest account is let through.
  const honest = budget.reserve(80n, "merchant");
  budget.finish(honest, false, 0n);
  now += 60 * 60 * 1000;
  budget.finish(budget.reserve(80n, "attacker"), false, 0n);
});

test("past three quarters of the pool, accounts with failures of their own are refused first", () => {
  const budget = new FailedFeeBudget("eip155:137", 1_000n, () => 1_000_000);
  // Four accounts each fail up to just under their share: 760 spent.
  for (const a of ["a", "b", "c", "d"]) budget.finish(budget.reserve(190n, a), true, 190n);
  assert.equal(budget.spent(), 760n);
  assert.throws(
    () => budget.reserve(10n, "a"),
    (e) => e instanceof FailedFeeBudgetSpentError && e.scope === "account",
  );
  // An account with no failure in the window keeps the last quarter.
  budget.finish(budget.reserve(200n, "clean"), false, 0n);
});

test("once half of the pool is used, payers with no success on record are refused first; known payers and unread ones are sent for", () => {
  const budget = new FailedFeeBudget("eip155:137", 1_000n, () => 1_000_000);
  // Fresh payers burst from several accounts, each under its share: 390 used.
  for (const a of ["a", "b", "c"]) budget.finish(budget.reserve(130n, a, false), true, 130n);
  // Under half, a fresh payer is still sent for, whatever its own worst fee.
  budget.finish(budget.reserve(200n, "e", false), false, 0n);
  budget.finish(budget.reserve(130n, "d", false), true, 130n);
  assert.equal(budget.spent(), 520n);
  assert.throws(
    () => budget.reserve(1n, "e", false),
    (e) =>
      e instanceof FailedFeeBudgetSpentError &&
      e.scope === "new-payer" &&
      /payers with a settled payment on record/.test(e.message),
  );
  // A payer with a success on record keeps the rest, on any account, as
  // does a payer whose history was not read.
  budget.finish(budget.reserve(30n, "e", true), false, 0n);
  budget.finish(budget.reserve(30n, "e", undefined), false, 0n);
});

test("payers with code are refused before payers without: fresh ones from three eighths spent, any from five eighths; a known payer without code never by a tier", () => {
  const budget = new FailedFeeBudget("eip155:8453", 1_000n, () => 1_000_000);
  const codeScope = (e: unknown) =>
    e instanceof FailedFeeBudgetSpentError &&
    e.scope === "payer-with-code" &&
    /carries code/.test(e.message);
  // One account's full share (a quarter) does not close the first tier.
  budget.finish(budget.reserve(240n, "a", false, true), true, 240n);
  budget.finish(budget.reserve(10n, "b", false, true), true, 10n);
  budget.finish(budget.reserve(1n, "c", false, true), false, 0n);
  // Past three eighths, a fresh payer with code is refused.
  budget.finish(budget.reserve(125n, "b", false, true), true, 125n);
  assert.equal(budget.spent(), 375n);
  assert.throws(() => budget.reserve(1n, "c", false, true), codeScope);
  // A fresh payer without code, and a known payer with code, still are.
  budget.finish(budget.reserve(1n, "c", false, false), false, 0n);
  budget.finish(budget.reserve(1n, "c", true, true), false, 0n);
  // Past five eighths, any payer with code is refused; one without keeps going.
  budget.finish(budget.reserve(150n, "d", true, false), true, 150n);
  budget.finish(budget.reserve(105n, "e", true, false), true, 105n);
  assert.equal(budget.spent(), 630n);
  assert.throws(() => budget.reserve(1n, "f", true, true), codeScope);
  budget.finish(budget.reserve(1n, "f", true, false), false, 0n);
  // Code not read (another family, or no payer) is never refused for it.
  budget.finish(budget.reserve(1n, "f", true, undefined), false, 0n);
});

test("a transaction a read counted in flight, ended since, counts once: as failed, not also as still in flight", async () => {
  let now = 1_000_000;
  let journalInFlight = 0n;
  const read = async (): Promise<FailedFeeExposure> => ({
    reverted: 0n,
    inFlight: journalInFlight,
    accounts: new Map([["attacker", { failed: 0n, inFlight: journalInFlight }]]),
    oldestFailure: undefined,
  });
  const budget = new FailedFeeBudget("eip155:8453", 1_000n, () => now, read);
  await budget.refresh();
  // A burst is sent and journaled, and a read sees it in flight.
  const holds = [1, 2, 3].map(() => budget.reserve(250n, "attacker"));
  now += 10;
  for (const h of holds) budget.journaled(h);
  journalInFlight = 750n;
  now += 10;
  await budget.refresh();
  assert.equal(budget.inFlight(), 750n);
  // They revert before the next read: 600 spent, nothing in flight.
  now += 10;
  for (const h of holds) budget.finish(h, true, 200n);
  assert.equal(budget.spent(), 600n);
  assert.equal(budget.inFlight(), 0n);
  assert.equal(budget.accountExposure("attacker").inFlight, 0n);
  // So a merchant's honest settle of 300 still fits (600 + 300 <= 1,000).
  budget.finish(budget.reserve(300n, "merchant", true), false, 0n);
  // The next read sees them ended: the correction is not applied twice.
  journalInFlight = 0n;
  now += 10;
  await budget.refresh();
  assert.equal(budget.inFlight(), 0n);
});

test("the journal's figures per account count across replicas, and Retry-After is the service's", async () => {
  const now = 10_000_000;
  const oldest = new Date(now - 59 * 60 * 1000); // leaves the window in a minute
  const read = async (): Promise<FailedFeeExposure> => ({
    reverted: 900n,
    inFlight: 0n,
    accounts: new Map([["other-replica-attacker", { failed: 300n, inFlight: 0n }]]),
    oldestFailure: oldest,
  });
  const budget = new FailedFeeBudget("solana:x", 1_000n, () => now, read);
  await budget.refresh();
  assert.throws(
    () => budget.reserve(10n, "other-replica-attacker"),
    (e) => e instanceof FailedFeeBudgetSpentError && e.scope === "account",
  );
  assert.throws(
    () => budget.reserve(200n, "merchant"),
    (e) =>
      e instanceof FailedFeeBudgetSpentError && e.scope === "network" && e.retryAfterSeconds === 60,
  );
});
