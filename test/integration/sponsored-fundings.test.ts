/**
 * The record of gas given to payers for their approve, on each database
 * backend: a payer is funded once until the payment that funding was for
 * settles, two replicas reserving for one payer at once fund it once, a
 * funding refused before it left is forgotten, and each account's fundings
 * over a day stop at its budget (another account's are not counted).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { availableBackends, openTestDb } from "../support/database.js";
import type { OpenedDb } from "../../src/storage/db.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { DbSponsoredFundings } from "../../src/features/settlements/sponsoredFundings.js";
import { runInSettlementScope } from "../../src/chains/settlementScope.js";

const NETWORK = "eip155:4663";
const BUDGET = 3;

for (const backend of availableBackends()) {
  describe(`sponsored fundings (${backend})`, () => {
    let opened: OpenedDb;
    let fundings: DbSponsoredFundings;

    before(async () => {
      opened = await openTestDb(backend);
      fundings = new DbSponsoredFundings(opened.db, BUDGET);
    });
    after(() => opened?.close());

    async function account(): Promise<{ accountId: string; keyId: string }> {
      const a = await createAccount(opened.db, "merchant");
      const key = await createApiKey(opened.db, a.id, "k");
      return { accountId: a.id, keyId: key.id };
    }

    /** A pending settlement of `owner`, as the intent stage writes it before the mechanism runs. */
    async function settlement(owner: { accountId: string; keyId: string }): Promise<string> {
      const id = randomUUID();
      await opened.db
        .insertInto("settlements")
        .values({
          id,
          account_id: owner.accountId,
          api_key_id: owner.keyId,
          network: NETWORK,
          scheme: "exact",
          payer: null,
          pay_to: "0x0000000000000000000000000000000000005a5a",
          asset: "0xe343167631d89B6Ffc58B88d6b7fB0228795491D",
          amount: "3000",
          payload_fingerprint: id,
          status: "pending",
          started_at: new Date(),
        } as never)
        .execute();
      return id;
    }

    const inScope = <T>(settlementId: string, fn: () => Promise<T>) =>
      runInSettlementScope({ id: settlementId, notes: { sent: false } }, fn);
    const payer = () => `0x${randomUUID().replaceAll("-", "").padEnd(40, "0")}`;
    const rows = (p: string) =>
      opened.db
        .selectFrom("sponsored_fundings")
        .selectAll()
        .where("payer", "=", p.toLowerCase())
        .execute();

    test("a payer is funded once until its payment settles, then may be funded again", async () => {
      const owner = await account();
      const p = payer();
      const first = await settlement(owner);
      assert.equal(await inScope(first, () => fundings.reserve(NETWORK, p, 10n)), undefined);
      // The same payer again, by another payment of it, before the first settles.
      const second = await settlement(owner);
      const refused = await inScope(second, () => fundings.reserve(NETWORK, p, 10n));
      assert.equal(refused?.kind, "already_funded");
      assert.equal((await fundings.refusal(NETWORK, p))?.kind, refused?.kind);
      // Another network is another account of the payer's.
      assert.equal(await inScope(second, () => fundings.reserve("eip155:8453", p, 10n)), undefined);
      // The first payment failed: the payer stays refused.
      await opened.db
        .updateTable("settlements")
        .set({ status: "failed" })
        .where("id", "=", first)
        .execute();
      assert.ok(await fundings.refusal(NETWORK, p));
      // Once that payment settles, the funding is paid for.
      await opened.db
        .updateTable("settlements")
        .set({ status: "succeeded" })
        .where("id", "=", first)
        .execute();
      assert.equal(await fundings.refusal(NETWORK, p), undefined);
      assert.equal(await inScope(second, () => fundings.reserve(NETWORK, p, 7n)), undefined);
      const recorded = await rows(p);
      assert.deepEqual(
        recorded.filter((r) => r.network === NETWORK).map((r) => [r.settled, r.wei]),
        [
          [true, "10"],
          [false, "7"],
        ],
      );
    });

    test("two reservations for one payer at once fund it once", async () => {
      const owner = await account();
      const p = payer();
      const [a, b] = [await settlement(owner), await settlement(owner)];
      const answers = await Promise.all([
        inScope(a, () => fundings.reserve(NETWORK, p, 1n)),
        inScope(b, () => fundings.reserve(NETWORK, p, 1n)),
      ]);
      assert.equal(answers.filter((x) => x === undefined).length, 1);
      assert.equal((await rows(p)).length, 1);
    });

    test("concurrent fundings of one account stop exactly at its budget", async () => {
      const owner = await account();
      const settlements = await Promise.all(
        Array.from({ length: BUDGET + 4 }, () => settlement(owner)),
      );
      const answers = await Promise.all(
        settlements.map((s) => inScope(s, () => fundings.reserve(NETWORK, payer(), 1n))),
      );
      assert.equal(answers.filter((x) => x === undefined).length, BUDGET);
      assert.ok(answers.filter((x) => x !== undefined).every((x) => x?.kind === "budget_spent"));
      const recorded = await opened.db
        .selectFrom("sponsored_fundings")
        .select("id")
        .where("account_id", "=", owner.accountId)
        .execute();
      assert.equal(recorded.length, BUDGET);
    });

    test("a funding released before it was sent is forgotten", async () => {
      const owner = await account();
      const p = payer();
      const s = await settlement(owner);
      await inScope(s, async () => {
        assert.equal(await fundings.reserve(NETWORK, p, 1n), undefined);
        await fundings.release(NETWORK, p);
      });
      assert.equal((await rows(p)).length, 0);
      assert.equal(await fundings.refusal(NETWORK, p), undefined);
    });

    test("an account's fundings stop at its budget; another account's are its own", async () => {
      const owner = await account();
      for (let i = 0; i < BUDGET; i++) {
        const s = await settlement(owner);
        assert.equal(await inScope(s, () => fundings.reserve(NETWORK, payer(), 1n)), undefined);
      }
      const over = await settlement(owner);
      const p = payer();
      const refused = await inScope(over, () => fundings.reserve(NETWORK, p, 1n));
      assert.equal(refused?.kind, "budget_spent");
      assert.match(refused!.message, /SPONSORED_FUNDINGS_PER_DAY/);
      assert.equal((await rows(p)).length, 0, "nothing recorded for a refused funding");
      const other = await account();
      const theirs = await settlement(other);
      assert.equal(await inScope(theirs, () => fundings.reserve(NETWORK, p, 1n)), undefined);
      // Outside a settlement nothing is funded.
      assert.ok(await fundings.reserve(NETWORK, payer(), 1n));
    });
  });
}
