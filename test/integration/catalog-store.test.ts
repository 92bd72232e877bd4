/**
 * The catalog's storage and write orchestration on every backend: accepts
 * merging inside the upsert, case-insensitive payTo keys, the write budget
 * (`processing`, then nothing lost at drain), read-cache invalidation
 * only when content changes, and another account's declaration kept as a
 * claim that changes nothing of the entry (the proof checker decides it:
 * test/integration/discovery-ownership.test.ts).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { sql } from "kysely";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { declareDiscoveryExtension } from "@x402/extensions/bazaar";
import { availableBackends, openTestDb } from "../support/database.js";
import type { OpenedDb } from "../../src/storage/db.js";
import { pino } from "pino";
import { createLogger } from "../../src/lib/logger.js";
import {
  countCatalogEntries,
  upsertCatalogEntry,
} from "../../src/features/catalog/catalogRepository.js";
import type { CatalogDraft } from "../../src/features/catalog/declaration.js";
import { Cataloger } from "../../src/features/catalog/cataloger.js";
import { createAccount } from "../../src/features/accounts/accounts.js";

const USDC = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";

function accept(
  network: string,
  amount = "1000",
  payTo = "0x00000000000000000000000000000000000000Aa",
) {
  return {
    scheme: "exact",
    network,
    asset: USDC,
    amount,
    payTo,
    maxTimeoutSeconds: 60,
    extra: {},
  } as PaymentRequirements;
}

function draft(resource: string, over: Partial<CatalogDraft> = {}): CatalogDraft {
  return {
    resource,
    toolName: "",
    type: "http",
    x402Version: 2,
    method: "GET",
    description: "A resource",
    accept: accept("eip155:8453"),
    extensionKeys: ["bazaar"],
    bazaar: { info: { input: { type: "http", method: "GET" } }, schema: { type: "object" } },
    ...over,
  };
}

function payment(
  url: string,
  description: string,
): { payload: PaymentPayload; reqs: PaymentRequirements } {
  const { bazaar } = declareDiscoveryExtension({ output: { example: { ok: true } } });
  const ext = structuredClone(bazaar) as unknown as { info: { input: Record<string, unknown> } };
  ext.info.input["method"] = "GET";
  const reqs = accept("eip155:8453");
  return {
    payload: {
      x402Version: 2,
      accepted: reqs,
      payload: {},
      resource: { url, description, mimeType: "application/json" },
      extensions: { bazaar: ext },
    },
    reqs,
  };
}

for (const backend of availableBackends()) {
  describe(`catalog store (${backend})`, () => {
    let opened: OpenedDb;
    const log = createLogger("silent");
    before(async () => {
      opened = await openTestDb(backend);
    });
    after(() => opened.close());

    test("accepts merge by (scheme, network, asset), newest first, at most 8", async () => {
      const url = "https://merge.example.com/a";
      const first = await upsertCatalogEntry(opened.db, draft(url), null);
      assert.ok(first.kind === "written" && first.inserted);
      const second = await upsertCatalogEntry(
        opened.db,
        draft(url, { accept: accept("eip155:10") }),
        null,
      );
      assert.ok(second.kind === "written" && !second.inserted);
      await upsertCatalogEntry(
        opened.db,
        draft(url, { accept: accept("eip155:8453", "2500") }),
        null,
      );
      const row = await opened.db
        .selectFrom("catalog_resources")
        .select(["accepts"])
        .where("resource", "=", url)
        .executeTakeFirstOrThrow();
      const accepts = row.accepts as PaymentRequirements[];
      assert.deepEqual(
        accepts.map((a) => [a.network, a.amount]),
        [
          ["eip155:8453", "2500"],
          ["eip155:10", "1000"],
        ],
      );

      for (let i = 0; i < 10; i++) {
        await upsertCatalogEntry(
          opened.db,
          draft(url, { accept: accept(`eip155:${100 + i}`) }),
          null,
        );
      }
      const capped = await opened.db
        .selectFrom("catalog_resources")
        .select(["accepts"])
        .where("resource", "=", url)
        .executeTakeFirstOrThrow();
      assert.deepEqual(
        (capped.accepts as PaymentRequirements[]).map((a) => a.network),
        [109, 108, 107, 106, 105, 104, 103, 102].map((n) => `eip155:${n}`),
      );
    });

    test("only the owner updates an entry; another account's upsert is a claim that changes no field, accept or owner", async () => {
      const owner = await createAccount(opened.db, "owner");
      const other = await createAccount(opened.db, "other");
      const url = "https://owned.example.com/a";
      const row = () =>
        opened.db
          .selectFrom("catalog_resources")
          .selectAll()
          .where("resource", "=", url)
          .executeTakeFirstOrThrow();
      const written = await upsertCatalogEntry(opened.db, draft(url), owner.id);
      assert.ok(written.kind === "written" && written.inserted);
      const before = await row();

      const refused = await upsertCatalogEntry(
        opened.db,
        draft(url, {
          description: "taken over",
          serviceName: "someone else",
          iconUrl: "https://evil.example.com/icon.png",
          // Same (scheme, network, asset): would replace the owner's accept.
          accept: accept("eip155:8453", "1", "0x00000000000000000000000000000000000000Bb"),
        }),
        other.id,
      );
      assert.deepEqual(refused, { kind: "claimed", ownerAccountId: owner.id, newClaim: true });
      assert.deepEqual(await row(), before, "nothing changed");
      const claim = await opened.db
        .selectFrom("catalog_claims")
        .selectAll()
        .where("resource", "=", url)
        .executeTakeFirstOrThrow();
      assert.equal(claim.account_id, other.id);
      assert.equal(claim.result, "pending");
      assert.equal((claim.draft as CatalogDraft).description, "taken over", "kept for a takeover");
      // Declared again: the same claim, refreshed.
      assert.deepEqual(
        await upsertCatalogEntry(opened.db, draft(url, { description: "again" }), other.id),
        { kind: "claimed", ownerAccountId: owner.id, newClaim: false },
      );
      assert.deepEqual(await row(), before, "still nothing changed");

      const refreshed = await upsertCatalogEntry(
        opened.db,
        draft(url, { description: "the owner's new text" }),
        owner.id,
      );
      assert.ok(refreshed.kind === "written" && !refreshed.inserted);
      assert.equal((await row()).description, "the owner's new text");

      // An entry without an owner (seeded outside the payment path) goes to
      // the first account that declares it.
      const unowned = "https://owned.example.com/unowned";
      await upsertCatalogEntry(opened.db, draft(unowned), null);
      const claimed = await upsertCatalogEntry(opened.db, draft(unowned), other.id);
      assert.ok(claimed.kind === "written" && !claimed.inserted);
      assert.deepEqual(await upsertCatalogEntry(opened.db, draft(unowned), owner.id), {
        kind: "claimed",
        ownerAccountId: other.id,
        newClaim: true,
      });
      // Without an account there is nothing to claim with.
      assert.deepEqual(await upsertCatalogEntry(opened.db, draft(unowned), null), {
        kind: "owned_elsewhere",
        ownerAccountId: other.id,
      });
    });

    test("payTo filters ignore the case of EVM addresses; scheme and network match one payment kind", async () => {
      const url = "https://merge.example.com/case";
      await upsertCatalogEntry(
        opened.db,
        draft(url, {
          accept: accept("eip155:42161", "1", "0xAbCdEf0000000000000000000000000000000001"),
        }),
        null,
      );
      const lower = await countCatalogEntries(opened.db, {
        payTo: "0xabcdef0000000000000000000000000000000001",
      });
      const upper = await countCatalogEntries(opened.db, {
        payTo: "0xABCDEF0000000000000000000000000000000001",
      });
      assert.equal(lower, 1);
      assert.equal(upper, 1);
      assert.equal(
        await countCatalogEntries(opened.db, {
          network: "eip155:42161",
          payTo: "0xabcdef0000000000000000000000000000000001",
          scheme: "exact",
        }),
        1,
      );
      assert.equal(
        await countCatalogEntries(opened.db, {
          network: "eip155:42161",
          payTo: "0x00000000000000000000000000000000000000aa",
        }),
        0,
        "network and payTo must hold for the same payment kind",
      );
    });

    test("a write past its budget answers processing and still lands; drain waits for it", async () => {
      const url = "https://slow.example.com/a";
      await upsertCatalogEntry(opened.db, draft(url), null);
      const before = await opened.db
        .selectFrom("catalog_resources")
        .select("last_updated")
        .where("resource", "=", url)
        .executeTakeFirstOrThrow();
      const cataloger = new Cataloger(opened.db, log, {
        allowPrivateHosts: false,
        writeBudgetMs: 50,
      });
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      // Another transaction holds the row (and, on PGlite, the one connection).
      let locked!: () => void;
      const lockTaken = new Promise<void>((r) => (locked = r));
      const blocker = opened.db.transaction().execute(async (trx) => {
        await sql`SELECT id FROM catalog_resources WHERE resource = ${url} FOR UPDATE`.execute(trx);
        locked();
        await held;
      });
      await lockTaken;
      const p = payment(url, "A slow resource");
      const outcome = await cataloger.record("settle", null, p.payload, p.reqs);
      assert.deepEqual(outcome, { status: "processing", resource: url });
      release();
      await blocker;
      await cataloger.drain();
      const after = await opened.db
        .selectFrom("catalog_resources")
        .select(["last_updated", "description"])
        .where("resource", "=", url)
        .executeTakeFirstOrThrow();
      assert.ok(after.last_updated.getTime() > before.last_updated.getTime());
      assert.equal(after.description, "A slow resource");
    });

    test("the read cache is invalidated when an entry is added or changes, not on a plain refresh", async () => {
      let changes = 0;
      const cataloger = new Cataloger(opened.db, log, {
        allowPrivateHosts: false,
        onChange: () => changes++,
      });
      const url = "https://changes.example.com/a";
      const p = payment(url, "First words");
      assert.equal(
        ((await cataloger.record("verify", null, p.payload, p.reqs)) as { action: string }).action,
        "cataloged",
      );
      assert.equal(changes, 1);
      assert.equal(
        ((await cataloger.record("settle", null, p.payload, p.reqs)) as { action: string }).action,
        "refreshed",
      );
      assert.equal(changes, 1, "same content: no invalidation");
      const edited = payment(url, "Second words");
      await cataloger.record("settle", null, edited.payload, edited.reqs);
      assert.equal(changes, 2);
    });

    test("another account's declaration is answered as a claim from then on, logged once with both account ids", async () => {
      const owner = await createAccount(opened.db, "owner");
      const intruder = await createAccount(opened.db, "intruder");
      const lines: Record<string, unknown>[] = [];
      const capture = pino(
        { level: "info" },
        { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
      );
      let changes = 0;
      const cataloger = new Cataloger(opened.db, capture, {
        allowPrivateHosts: false,
        onChange: () => changes++,
      });
      const url = "https://claimed.example.com/a";
      const p = payment(url, "The owner's");
      assert.deepEqual(await cataloger.record("verify", owner.id, p.payload, p.reqs), {
        status: "success",
        action: "cataloged",
        resource: url,
      });
      assert.equal(changes, 1);
      const claimed = { status: "processing", resource: url, action: "claimed" };
      // The very same declaration, and a different one: either is a claim, nothing more.
      for (const q of [p, payment(url, "The intruder's")]) {
        assert.deepEqual(await cataloger.record("verify", intruder.id, q.payload, q.reqs), claimed);
      }
      const ignored = lines.filter((l) => /recorded as a claim/.test(String(l["msg"])));
      assert.equal(ignored.length, 2);
      assert.equal(ignored[0]!["ownerAccountId"], owner.id);
      assert.equal(ignored[0]!["declaringAccountId"], intruder.id);
      // Repeated within the refresh interval: answered from memory, no write, no new line.
      assert.deepEqual(await cataloger.record("verify", intruder.id, p.payload, p.reqs), claimed);
      assert.equal(lines.filter((l) => /recorded as a claim/.test(String(l["msg"]))).length, 2);
      assert.equal(changes, 1, "the read cache was never cleared for a claim");
      const row = await opened.db
        .selectFrom("catalog_resources")
        .select(["account_id", "description"])
        .where("resource", "=", url)
        .executeTakeFirstOrThrow();
      assert.deepEqual(row, { account_id: owner.id, description: "The owner's" });
    });

    test("a repeated verify inside the refresh interval is answered without a write", async () => {
      let clock = 1_000_000;
      const cataloger = new Cataloger(opened.db, log, {
        allowPrivateHosts: false,
        verifyRefreshIntervalMs: 60_000,
        now: () => clock,
      });
      const url = "https://interval.example.com/a";
      const p = payment(url, "Interval");
      await cataloger.record("verify", null, p.payload, p.reqs);
      const stamp = async () =>
        (
          await opened.db
            .selectFrom("catalog_resources")
            .select("last_updated")
            .where("resource", "=", url)
            .executeTakeFirstOrThrow()
        ).last_updated.getTime();
      const first = await stamp();
      clock += 59_000;
      assert.deepEqual(await cataloger.record("verify", null, p.payload, p.reqs), {
        status: "success",
        action: "unchanged",
        resource: url,
      });
      assert.equal(await stamp(), first);
      clock += 2_000;
      assert.equal(
        ((await cataloger.record("verify", null, p.payload, p.reqs)) as { action: string }).action,
        "refreshed",
      );
      assert.ok((await stamp()) > first);
    });
  });
}
