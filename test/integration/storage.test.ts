/**
 * Storage on every backend: migrations, API keys (hash-only storage,
 * revocation), authentication, and the PGlite driver's isolation of
 * concurrent transactions.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { sql } from "kysely";
import { availableBackends, openTestDb } from "../support/database.js";
import type { OpenedDb } from "../../src/storage/db.js";
import { migrateToLatest } from "../../src/storage/migrate.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey, deleteApiKey, listApiKeys } from "../../src/features/keys/apiKeys.js";
import { ApiKeyAuthenticator } from "../../src/features/keys/authenticator.js";
import { hashApiKey } from "../../src/features/keys/apiKeyFormat.js";

for (const backend of availableBackends()) {
  describe(`storage (${backend})`, () => {
    let opened: OpenedDb;
    before(async () => {
      opened = await openTestDb(backend);
    });
    after(() => opened.close());

    test("migrations are recorded and re-running them is a no-op", async () => {
      const applied = await migrateToLatest(opened.db as never);
      assert.deepEqual(applied, []);
      const rows = await sql<{
        name: string;
      }>`select name from kysely_migration order by name`.execute(opened.db);
      assert.ok(rows.rows.some((r) => r.name === "0001_spine"));
    });

    test("an account holds several keys; only hashes and masked prefixes are stored", async () => {
      const account = await createAccount(opened.db, "acme");
      const staging = await createApiKey(opened.db, account.id, "staging");
      const production = await createApiKey(opened.db, account.id, "production");
      const rows = await opened.db
        .selectFrom("api_keys")
        .selectAll()
        .where("account_id", "=", account.id)
        .execute();
      assert.equal(rows.length, 2);
      for (const row of rows) {
        const full = row.id === staging.id ? staging.key : production.key;
        assert.deepEqual(Buffer.from(row.key_hash), hashApiKey(full));
        assert.ok(
          !JSON.stringify({ ...row, key_hash: null }).includes(full.slice(12)),
          "full key not stored",
        );
        assert.ok(full.startsWith(row.prefix.replace("…", "")));
      }
      const listed = await listApiKeys(opened.db, account.id);
      assert.deepEqual(listed.map((k) => k.name).sort(), ["production", "staging"]);
      assert.ok(!JSON.stringify(listed).includes(staging.key));
    });

    test("authentication accepts live keys, rejects unknown and deleted ones, and caches", async () => {
      const account = await createAccount(opened.db, "auth");
      const key = await createApiKey(opened.db, account.id, "k");
      const auth = new ApiKeyAuthenticator(opened.db, { cacheTtlMs: 60_000 });
      const principal = await auth.authenticate(key.key);
      assert.deepEqual(principal, { keyId: key.id, keyName: "k", accountId: account.id });
      assert.equal(
        await auth.authenticate(key.key.slice(0, -1) + (key.key.endsWith("A") ? "B" : "A")),
        null,
      );
      assert.equal(await auth.authenticate(undefined), null);
      assert.equal(await deleteApiKey(opened.db, key.id), true);
      assert.equal(
        await deleteApiKey(opened.db, key.id),
        false,
        "deleting twice reports nothing deleted",
      );
      assert.ok(await auth.authenticate(key.key), "still cached until the TTL");
      auth.invalidate();
      assert.equal(await auth.authenticate(key.key), null);
      assert.equal((await listApiKeys(opened.db, account.id)).length, 0);
    });

    test("concurrent transactions do not see each other's uncommitted writes", async () => {
      const account = await createAccount(opened.db, "tx");
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const slow = opened.db.transaction().execute(async (trx) => {
        await trx
          .updateTable("accounts")
          .set({ name: "renamed" })
          .where("id", "=", account.id)
          .execute();
        await gate;
        throw new Error("roll back");
      });
      // While the transaction is open, an outside read must not see "renamed".
      const outside = opened.db
        .selectFrom("accounts")
        .select("name")
        .where("id", "=", account.id)
        .executeTakeFirstOrThrow();
      setTimeout(release, 50);
      await assert.rejects(slow, /roll back/);
      assert.equal((await outside).name, "tx");
      const after = await opened.db
        .selectFrom("accounts")
        .select("name")
        .where("id", "=", account.id)
        .executeTakeFirstOrThrow();
      assert.equal(after.name, "tx");
    });
  });
}
