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
 * Today: 8 statements in 10 round trips on EVM, 4 of them before the
 * broadcast (7 in 9, and 3, on Solana, which has no pending-transaction
 * read); the payer's history and cooling are read in the intent's own
 * statement.
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

      test("a new payment's settle: its statements, listed", async (t) => {
        // Warm: the key's look-up and the chain's first reads are cached after.
        assert.equal((await settleCounted(0)).answer.success, true);
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
          // Before the broadcast: the intent (with the payer's history read in
          // its statement), the quota reservation, on EVM the read of a
          // transaction an earlier attempt left pending, and the journal
          // entry, the last before the transaction leaves.
          const journaled = exchanges.findIndex((e) => /^\s*with open as/.test(e.sql ?? ""));
          assert.ok(journaled >= 0, "the journal entry was written");
          assert.equal(
            journaled + 1,
            family === ADAPTERS.eip155 ? 4 : 3,
            `round trips before the broadcast; ${listing}`,
          );
          assert.ok(
            !exchanges.some((e) => /^with "live"/.test(e.sql ?? "")),
            `no look-up of the payer before the intent: its statement reads the history; ${listing}`,
          );
          // After it: the chain's word on the transaction, and the outcome's
          // transaction (the transition, its webhook event, the quota charge).
          assert.equal(exchanges.length, family === ADAPTERS.eip155 ? 10 : 9, listing);
        }
      });
    });
  }
