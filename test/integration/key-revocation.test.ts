/**
 * A deleted API key stops working at once on every replica, not when each
 * replica's key cache expires: the deletion is announced through the shared
 * PostgreSQL server (`NOTIFY`), and every replica listening drops its cache.
 * The caches here live a minute, so only the notice can explain the refusal.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { openTestDb } from "../support/database.js";
import { until } from "../support/processes.js";
import { ApiKeyAuthenticator } from "../../src/features/keys/authenticator.js";
import { API_KEYS_CHANGED, createApiKey, deleteApiKey } from "../../src/features/keys/apiKeys.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { listenForChanges, type ChangeFeed } from "../../src/storage/changeFeed.js";
import { createLogger } from "../../src/lib/logger.js";

const databaseUrl = process.env["TEST_DATABASE_URL"];

describe(
  "API key revocation across replicas",
  { skip: !databaseUrl && "needs TEST_DATABASE_URL" },
  () => {
    let db: Awaited<ReturnType<typeof openTestDb>>;
    const feeds: ChangeFeed[] = [];

    before(async () => {
      db = await openTestDb("postgres");
    });
    after(async () => {
      await Promise.all(feeds.map((f) => f.close()));
      await db.close();
    });

    test("two replicas with cached keys: a key deleted through one is refused by the other at once", async () => {
      const log = createLogger("silent");
      const replicas = [0, 1].map(() => {
        const auth = new ApiKeyAuthenticator(db.db, { cacheTtlMs: 60_000 });
        feeds.push(listenForChanges(db.url, API_KEYS_CHANGED, () => auth.invalidate(), log));
        return auth;
      });
      const account = await createAccount(db.db, "revocation");
      const doomed = await createApiKey(db.db, account.id, "doomed");
      const kept = await createApiKey(db.db, account.id, "kept");
      for (const auth of replicas) {
        assert.equal((await auth.authenticate(doomed.key))?.accountId, account.id);
        assert.equal((await auth.authenticate(kept.key))?.accountId, account.id);
      }
      assert.equal(await deleteApiKey(db.db, doomed.id), true);
      for (const auth of replicas) {
        await until("the replica refuses the deleted key", async () =>
          (await auth.authenticate(doomed.key)) === null ? true : undefined,
        );
        assert.equal((await auth.authenticate(kept.key))?.accountId, account.id);
      }
    });
  },
);
