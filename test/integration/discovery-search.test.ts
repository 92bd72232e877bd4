/**
 * Search finds what a user expects, and both reads say how they paged
 * (issue 68): a word of the URL's host or path, the description and the
 * type find an entry (`query=http` found nothing before: neither the type
 * nor the scheme was a word of the entry); `pagination` carries the applied
 * `limit`, the `offset` and the `total`, on /discovery/resources and
 * /discovery/search alike, over a catalog of 250 entries. Seeded through
 * the repository, read over HTTP with the official client, on every
 * database backend available.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { HTTPFacilitatorClient } from "@x402/core/server";
import type { PaymentRequirements } from "@x402/core/types";
import { withBazaar } from "@x402/extensions/bazaar";
import { startStack, type TestStack } from "../support/stack.js";
import { availableBackends } from "../support/database.js";
import { upsertCatalogEntry } from "../../src/features/catalog/catalogRepository.js";
import type { CatalogDraft } from "../../src/features/catalog/declaration.js";

const BULK = 250;

function draft(over: Partial<CatalogDraft> & { resource: string }): CatalogDraft {
  return {
    toolName: "",
    type: "http",
    x402Version: 2,
    method: "GET",
    accept: {
      scheme: "exact",
      network: "eip155:8453",
      asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
      amount: "1000",
      payTo: "0x00000000000000000000000000000000000000Aa",
      maxTimeoutSeconds: 60,
      extra: {},
    } as PaymentRequirements,
    extensionKeys: ["bazaar"],
    bazaar: { info: { input: { type: "http", method: "GET" } }, schema: { type: "object" } },
    ...over,
  };
}

interface SearchPage {
  resources: { resource: string; type: string }[];
  partialResults: boolean;
  pagination: { limit: number; offset: number; total: number; cursor: string | null };
}

interface ListPage {
  items: { resource: string }[];
  pagination: { limit: number; offset: number; total: number };
}

for (const backend of availableBackends()) {
  describe(`catalog search and paging (${backend})`, () => {
    let stack: TestStack;
    const HARBOUR = "https://harbourmaster.example.org/api/tide-tables";
    const TOOLS = "https://tools.example.org/rpc";
    const ALL = BULK + 2;

    const get = async <T>(path: string): Promise<T> => {
      const res = await fetch(`${stack.url}${path}`);
      assert.equal(res.status, 200, path);
      return (await res.json()) as T;
    };
    const search = (qs: string) => get<SearchPage>(`/discovery/search?${qs}`);
    const list = (qs = "") => get<ListPage>(`/discovery/resources?${qs}`);

    before(async () => {
      stack = await startStack({ backend });
      // Nothing here is fetched: the seeded hosts do not exist.
      await stack.service.workers.catalogProofs?.stop();
      const db = stack.service.db;
      for (let i = 0; i < BULK; i++) {
        await upsertCatalogEntry(
          db,
          draft({
            resource: `https://shop${i}.example.net/v1/goods/${i}`,
            description: `Catalog item number ${i}`,
          }),
          null,
        );
      }
      await upsertCatalogEntry(
        db,
        draft({ resource: HARBOUR, description: "Nautical almanac for sailors" }),
        null,
      );
      await upsertCatalogEntry(
        db,
        draft({
          resource: TOOLS,
          type: "mcp",
          toolName: "get_quote",
          method: undefined,
          description: "Stock quotes",
          bazaar: { info: { input: { type: "mcp", toolName: "get_quote" } }, schema: {} },
        }),
        null,
      );
    });
    after(() => stack.stop());

    test("a word of the host, a word of the path, the description and the type each find the entry", async () => {
      const only = async (query: string) =>
        (await search(`query=${encodeURIComponent(query)}`)).resources.map((r) => r.resource);
      assert.deepEqual(await only("harbourmaster"), [HARBOUR], "the host, whole");
      assert.deepEqual(await only("tide"), [HARBOUR], "a word of the path");
      assert.deepEqual(await only("tables"), [HARBOUR], "another word of the path");
      assert.deepEqual(await only("almanac"), [HARBOUR], "the description");
      assert.deepEqual(await only("harbour"), [HARBOUR], "the start of a word");
      // The type: the MCP entry's URL has no "mcp" in it.
      assert.deepEqual(await only("mcp"), [TOOLS]);
      const typed = await search("query=mcp&type=mcp");
      assert.deepEqual(
        typed.resources.map((r) => r.type),
        ["mcp"],
      );
      // `http` was 0 results before: it is the type of the HTTP entries and
      // the scheme's word of every URL here.
      const http = await search("query=http&limit=1");
      assert.equal(http.pagination.total, ALL);
      assert.equal((await search("query=https&limit=1")).pagination.total, ALL);
      const official = await withBazaar(
        new HTTPFacilitatorClient({ url: stack.url }),
      ).extensions.bazaar.search({ query: "http", type: "http", limit: 5 });
      assert.equal(official.resources.length, 5);
      assert.deepEqual(official.pagination, {
        limit: 5,
        offset: 0,
        total: BULK + 1,
        cursor: official.pagination!.cursor,
      });
      assert.ok(official.pagination!.cursor);
    });

    test("listing: pagination is the applied limit, the offset and the total, over 250 entries", async () => {
      const first = await list();
      assert.deepEqual(first.pagination, { limit: 20, offset: 0, total: ALL });
      assert.equal(first.items.length, 20);
      const big = await list("limit=1000");
      assert.deepEqual(big.pagination, { limit: 100, offset: 0, total: ALL });
      assert.equal(big.items.length, 100);
      const seen: string[] = [];
      for (let offset = 0; offset < ALL; offset += 100) {
        const page = await list(`limit=100&offset=${offset}`);
        assert.deepEqual(page.pagination, { limit: 100, offset, total: ALL });
        assert.equal(page.items.length, Math.min(100, ALL - offset));
        seen.push(...page.items.map((i) => i.resource));
      }
      assert.equal(new Set(seen).size, ALL, "each entry exactly once");
      const past = await list("offset=300");
      assert.deepEqual(past.items, []);
      assert.deepEqual(past.pagination, { limit: 20, offset: 300, total: ALL });
    });

    test("search: pagination is the applied limit, the offset and the total too, by cursor or offset", async () => {
      const seen: string[] = [];
      let cursor: string | null = null;
      let offset = 0;
      do {
        const qs: string = `query=goods&limit=100${cursor ? `&cursor=${cursor}` : ""}`;
        const page = await search(qs);
        assert.equal(page.pagination.limit, 100, "the limit applied, not the results returned");
        assert.equal(page.pagination.offset, offset);
        assert.equal(page.pagination.total, BULK);
        assert.equal(page.partialResults, false);
        assert.equal(page.resources.length, Math.min(100, BULK - offset));
        seen.push(...page.resources.map((r) => r.resource));
        cursor = page.pagination.cursor;
        offset += 100;
      } while (cursor);
      assert.equal(offset, 300, "three pages");
      assert.equal(new Set(seen).size, BULK, "each match exactly once");

      const tail = await search("query=goods&offset=240");
      assert.deepEqual(tail.pagination, { limit: 20, offset: 240, total: BULK, cursor: null });
      assert.equal(tail.resources.length, 10);
      const clamped = await search("query=goods&limit=1000");
      assert.equal(clamped.pagination.limit, 100);
      assert.equal(clamped.resources.length, 100);
      const one = await search("query=almanac&limit=7");
      assert.deepEqual(one.pagination, { limit: 7, offset: 0, total: 1, cursor: null });
      const none = await search("query=zeppelin");
      assert.deepEqual(none.pagination, { limit: 20, offset: 0, total: 0, cursor: null });
    });

    test("a stale entry is in neither the pages nor the totals", async () => {
      await stack.service.db
        .updateTable("catalog_resources")
        .set({ state: "stale" })
        .where("resource", "=", HARBOUR)
        .execute();
      stack.service.catalog.invalidateReads();
      try {
        assert.equal((await list()).pagination.total, ALL - 1);
        const gone = await search("query=harbourmaster");
        assert.deepEqual(gone.resources, []);
        assert.equal(gone.pagination.total, 0);
        assert.equal((await search("query=http&limit=1")).pagination.total, ALL - 1);
      } finally {
        await stack.service.db
          .updateTable("catalog_resources")
          .set({ state: "unproven" })
          .where("resource", "=", HARBOUR)
          .execute();
        stack.service.catalog.invalidateReads();
      }
      assert.equal((await list()).pagination.total, ALL);
    });
  });
}
