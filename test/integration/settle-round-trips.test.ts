/**
 * What one settle asks of the database on its own path: its statements and
 * round trips, counted on the real service (an EVM and a Solana payment on their
 * devnets,
 * PGlite, and PostgreSQL when available), and listed by their text in the
 * test's output. The settle runs in an async context of its own, so the
 * workers' statements running meanwhile (the reconciler's scans, the
 * webhook sender) are told apart and left out; a group-commit flush a
 * settle starts runs in that settle's context.
 *
 * Today: 3 statements in 3 round trips on EVM and on Solana, 2 of them
 * before the broadcast: the intent (with the payer's history and cooling,
 * its quota reservation, and on EVM the pending-transaction store's row,
 * in its statement) and the journal entry. The outcome is one
 * statement: the chain's word on the transaction, the row's transition,
 * its webhook event and its quota charge with the reservation given back.
 *
 * A lone settle shares nothing, so these are its full cost; concurrent
 * settles share the same statements (group commit), which the bench
 * measures (`npm run bench`).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { AsyncLocalStorage } from "node:async_hooks";
import { startStack, type TestStack } from "../support/stack.js";
import { availableBackends } from "../support/database.js";
import { setWebhookEndpoint } from "../../src/features/webhooks/webhookRepository.js";
import { ADAPTERS } from "../families/index.js";
import { requestOf, requirementsFor, signedBy } from "../families/signing.js";

/** What one settle asked of the database, in order. */
interface Exchange {
  kind: "statement" | "begin" | "commit" | "rollback" | "savepoint";
  sql?: string;
}

const FAMILIES = [ADAPTERS.eip155, ADAPTERS.solana];

for (const family of FAMILIES)
  for (const backend of availableBackends()) {
    describe(`the database round trips of one settle (${family.name}, ${backend})`, () => {
      let stack: TestStack;
      let principal: { accountId: string; keyId: string; keyName: string };
      const settleContext = new AsyncLocalStorage<Exchange[]>();

      before(async () => {
        // As the bench runs it: metered, with a webhook endpoint (its outcome
        // then writes the quota charge and the outbox event too).
        stack = await startStack({
          ...family.stack,
          backend,
          env: { METER_SETTLEMENTS: "true" },
          dbTraffic: {
            statement: (sql) => settleContext.getStore()?.push({ kind: "statement", sql }),
            transactionControl: (kind) => settleContext.getStore()?.push({ kind }),
          },
        });
        const key = await stack.service.db
          .selectFrom("api_keys")
          .select(["id", "name"])
          .where("account_id", "=", stack.accountId)
          .executeTakeFirstOrThrow();
        principal = { accountId: stack.accountId, keyId: key.id, keyName: key.name };
        await setWebhookEndpoint(stack.service.db, stack.accountId, "http://127.0.0.1:9/hook", {
          allowPrivateTargets: true,
        });
      });
      after(() => stack?.stop());

      /** Settles a new payment from payer `i`, in a context of its own; what it asked. */
      async function settleCounted(i: number) {
        const requirements = await requirementsFor(stack, family, 1000n + BigInt(i));
        const body = requestOf(await signedBy(stack, family, i, requirements), requirements);
        const seen: Exchange[] = [];
        // The service's own settle, as its /settle route calls it (an HTTP
        // request would run in the server's context, not this one).
        const answer = await settleContext.run(seen, () =>
          stack.service.payments.settle(principal, body as never),
        );
        // The failed-fee budget's refresh of its figures, started by whichever
        // settle finds them a few seconds old and not waited for, is no part
        // of any settle's path (on a slow machine it falls into one).
        const exchanges = seen.filter((e) => !/sum\(t\.fee\)/.test(e.sql ?? ""));
        return { answer, exchanges };
      }

      /** The row a transaction settled. */
      async function settlementIdOf(transaction: string): Promise<string> {
        const row = await stack.service.db
          .selectFrom("settlements")
          .select("id")
          .where("transaction", "=", transaction)
          .executeTakeFirstOrThrow();
        return row.id;
      }

      test("a new payment's settle: its statements, listed", async (t) => {
        // Warm: the key's look-up and the chain's first reads are cached after.
        assert.equal((await settleCounted(0)).answer.success, true);
        let usedBefore = (
          await stack.service.db
            .selectFrom("quota_usage")
            .select("used")
            .where("account_id", "=", stack.accountId)
            .executeTakeFirstOrThrow()
        ).used;
        // A payer with a success on record, and one without: both paths.
        for (const i of [0, 1]) {
          const { answer, exchanges } = await settleCounted(i);
          assert.equal(answer.success, true);
          const statements = exchanges.filter((e) => e.kind === "statement");
          const listing =
            `payer ${i}: ${statements.length} statements, ${exchanges.length} round trips:\n` +
            exchanges
              .map(
                (e) =>
                  `  ${e.kind === "statement" ? e.sql!.replace(/\s+/g, " ").slice(0, 110) : e.kind}`,
              )
              .join("\n");
          t.diagnostic(listing);
          assert.ok(statements.length > 0, "the settle's statements were seen in its context");
          // Before the broadcast: the intent (with the payer's history, the
          // pending-transaction store's row and the quota reservation in its
          // statement) and the journal entry, the last before the
          // transaction leaves.
          const journaled = exchanges.findIndex((e) => /^\s*with open as/.test(e.sql ?? ""));
          assert.ok(journaled >= 0, "the journal entry was written");
          assert.equal(journaled + 1, 2, `round trips before the broadcast; ${listing}`);
          const intent = exchanges[0]!.sql ?? "";
          for (const part of ["insert into settlements", "update quota_usage"])
            assert.ok(intent.includes(part), `the intent's statement has ${part}; ${listing}`);
          assert.ok(
            !exchanges.some((e) => /from "pending_settlements"/.test(e.sql ?? "")),
            `no read of the pending-transaction store of its own: the intent's statement read it; ${listing}`,
          );
          assert.ok(
            !exchanges.some((e) => /^with "live"/.test(e.sql ?? "")),
            `no look-up of the payer before the intent: its statement reads the history; ${listing}`,
          );
          // After it, one: the outcome's statement, with the chain's word on
          // the transaction, the transition, its webhook event and the quota
          // charge, and no transaction around it.
          assert.equal(exchanges.length, journaled + 2, listing);
          const outcome = exchanges.at(-1)!.sql ?? "";
          for (const part of [
            "update settlement_transactions",
            "update settlements",
            "insert into webhook_events",
            "insert into quota_usage",
          ])
            assert.ok(outcome.includes(part), `the outcome's statement has ${part}; ${listing}`);
          // And each part wrote: the journal entry's word, the event, the charge.
          const id = answer.success ? await settlementIdOf(answer.transaction) : "";
          const row = await stack.service.db
            .selectFrom("settlements as s")
            .innerJoin("settlement_transactions as t", "t.settlement_id", "s.id")
            .select(["s.status", "s.billed", "t.status as journaled"])
            .where("s.id", "=", id)
            .executeTakeFirstOrThrow();
          assert.deepEqual(row, { status: "succeeded", billed: true, journaled: "success" });
          const events = await stack.service.db
            .selectFrom("webhook_events")
            .select(["type", "payload"])
            .where("settlement_id", "=", id)
            .execute();
          assert.equal(events.length, 1);
          assert.equal(events[0]!.type, "settlement.succeeded");
          const data = (JSON.parse(events[0]!.payload) as { data: Record<string, unknown> }).data;
          assert.equal(data.id, id);
          assert.equal(data.transaction, answer.transaction);
          assert.match(String(data.finishedAt), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
          const usage = await stack.service.db
            .selectFrom("quota_usage")
            .select(["used", "reserved"])
            .where("account_id", "=", stack.accountId)
            .executeTakeFirstOrThrow();
          assert.equal(usage.reserved, 0, "the reservation was given back");
          assert.equal(usage.used, usedBefore + 1, "the success was charged once");
          usedBefore = usage.used;
        }
      });
    });
  }
