/**
 * Reading the catalog over HTTP with the official discovery client
 * (`withBazaar(new HTTPFacilitatorClient(...))`): filters, offset paging
 * newest first, ranked full-text search with cursor paging, and bad
 * parameters answered with 400 in the error envelope, never 500. Seeded
 * straight through the repository on every backend.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { fuzzSeed, seededRandom } from "../support/seededRandom.js";
import { HTTPFacilitatorClient } from "@x402/core/server";
import type { PaymentRequirements } from "@x402/core/types";
import { withBazaar, type DiscoveryResource } from "@x402/extensions/bazaar";
import { startStack, type TestStack } from "../support/stack.js";
import { availableBackends } from "../support/database.js";
import { upsertCatalogEntry } from "../../src/features/catalog/catalogRepository.js";
import type { CatalogDraft } from "../../src/features/catalog/declaration.js";

const PAY_A = "0xAAAA00000000000000000000000000000000000A";
const PAY_B = "0xBbBb00000000000000000000000000000000000b";
const TOPICS = ["weather", "stocks", "maps"] as const;
const HTTP_COUNT = 30;
const MCP_COUNT = 5;

function accept(network: string, payTo: string): PaymentRequirements {
  return {
    scheme: "exact",
    network,
    asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
    amount: "1000",
    payTo,
    maxTimeoutSeconds: 60,
    extra: {},
  } as PaymentRequirements;
}

function draft(over: Partial<CatalogDraft> & { resource: string }): CatalogDraft {
  return {
    toolName: "",
    type: "http",
    x402Version: 2,
    method: "GET",
    accept: accept("eip155:8453", PAY_A),
    extensionKeys: ["bazaar"],
    bazaar: { info: { input: { type: "http", method: "GET" } }, schema: { type: "object" } },
    ...over,
  };
}

for (const backend of availableBackends()) {
  describe(`catalog reads (${backend})`, () => {
    let stack: TestStack;
    let discovery: ReturnType<typeof withBazaar<HTTPFacilitatorClient>>["extensions"]["bazaar"];
    /** Resource URLs in the order they were cataloged. */
    const seeded: string[] = [];

    before(async () => {
      stack = await startStack({ backend });
      discovery = withBazaar(new HTTPFacilitatorClient({ url: stack.url })).extensions.bazaar;
      const db = stack.service.db;
      for (let i = 0; i < HTTP_COUNT; i++) {
        const topic = TOPICS[i % 3]!;
        const resource = `https://svc${i}.example.com/api/${topic}`;
        await upsertCatalogEntry(
          db,
          draft({
            resource,
            description: `${topic} data service ${i}`,
            accept: accept(i % 3 === 0 ? "eip155:10" : "eip155:8453", i % 2 ? PAY_A : PAY_B),
            extensionKeys: i % 5 === 0 ? ["bazaar", "payment-identifier"] : ["bazaar"],
          }),
          null,
        );
        seeded.push(resource);
      }
      for (let i = 0; i < MCP_COUNT; i++) {
        const resource = `https://mcp${i}.example.com/mcp`;
        await upsertCatalogEntry(
          db,
          draft({
            resource,
            type: "mcp",
            toolName: `tide_tool_${i}`,
            method: undefined,
            description: `Marine tides tool ${i}`,
            bazaar: { info: { input: { type: "mcp", toolName: `tide_tool_${i}` } }, schema: {} },
          }),
          null,
        );
        seeded.push(resource);
      }
      // Ranking fixtures: "aurora" in the name, in a tag, in the description.
      const ranked: [string, Partial<CatalogDraft>][] = [
        ["https://c.example.org/sightings", { description: "We report aurora sightings nightly" }],
        ["https://a.example.org/forecast", { serviceName: "Aurora Watch", description: "Sky" }],
        ["https://b.example.org/lights", { tags: ["aurora", "sky"], description: "Lights" }],
      ];
      for (const [resource, over] of ranked) {
        await upsertCatalogEntry(db, draft({ resource, ...over }), null);
        seeded.push(resource);
      }
    });
    after(() => stack.stop());

    const total = () => HTTP_COUNT + MCP_COUNT + 3;

    test("the default page is 20 entries, newest first, with the total", async () => {
      const page = await discovery.listResources();
      assert.equal(page.x402Version, 2);
      assert.deepEqual(page.pagination, { limit: 20, offset: 0, total: total() });
      assert.deepEqual(
        page.items.map((i) => i.resource),
        [...seeded].reverse().slice(0, 20),
      );
      const stamps = page.items.map((i) => Date.parse(i.lastUpdated));
      assert.deepEqual(
        stamps,
        [...stamps].sort((a, b) => b - a),
      );
    });

    test("limit and offset page through everything exactly once", async () => {
      const seen: string[] = [];
      for (let offset = 0; offset < total() + 7; offset += 7) {
        const page = await discovery.listResources({ limit: 7, offset });
        assert.deepEqual(page.pagination, { limit: 7, offset, total: total() });
        seen.push(...page.items.map((i) => i.resource));
      }
      assert.deepEqual(seen, [...seeded].reverse());
      const beyond = await discovery.listResources({ offset: 1000 });
      assert.deepEqual(beyond.items, []);
      assert.equal(beyond.pagination.total, total());
    });

    test("a page larger than the maximum is served at the maximum and says so; past the end is an empty page", async () => {
      // The official client asks for what it wants; it gets our largest page.
      const big = await discovery.listResources({ limit: 1000 });
      assert.deepEqual(big.pagination, { limit: 100, offset: 0, total: total() });
      assert.equal(big.items.length, total());
      const raw = await fetch(`${stack.url}/discovery/resources?limit=1000&offset=2`);
      assert.equal(raw.status, 200);
      const body = (await raw.json()) as { items: unknown[]; pagination: unknown };
      assert.deepEqual(body.pagination, { limit: 100, offset: 2, total: total() });
      assert.equal(body.items.length, total() - 2);
      // Past the end, however far: an empty page with the total.
      for (const offset of [total(), 5_000_000]) {
        const past = await discovery.listResources({ limit: 1000, offset });
        assert.deepEqual(past.items, []);
        assert.deepEqual(past.pagination, { limit: 100, offset, total: total() });
      }

      const all = await discovery.search({ query: "data", limit: 1000 });
      assert.equal(all.resources.length, HTTP_COUNT, "every match in one page of at most 100");
      assert.deepEqual(all.pagination, { limit: 100, offset: 0, total: HTTP_COUNT, cursor: null });
      const page = await fetch(`${stack.url}/discovery/search?query=data&limit=1000&offset=25`);
      assert.equal(page.status, 200);
      const rest = (await page.json()) as { resources: DiscoveryResource[]; pagination: unknown };
      assert.deepEqual(
        rest.resources.map((r) => r.resource),
        all.resources.slice(25).map((r) => r.resource),
      );
      const past = await fetch(`${stack.url}/discovery/search?query=data&offset=500`);
      assert.equal(past.status, 200);
      const none = (await past.json()) as { resources: unknown[]; pagination: unknown };
      assert.deepEqual(none.resources, []);
      assert.deepEqual(none.pagination, {
        limit: 20,
        offset: 500,
        total: HTTP_COUNT,
        cursor: null,
      });
    });

    test("type, payTo, scheme, network and extensions filter, alone and together", async () => {
      const all = async (params: Parameters<typeof discovery.listResources>[0]) => {
        const page = await discovery.listResources({ limit: 100, ...params });
        assert.equal(page.pagination.total, page.items.length);
        return page.items;
      };
      const mcp = await all({ type: "mcp" });
      assert.equal(mcp.length, MCP_COUNT);
      assert.ok(mcp.every((i) => i.type === "mcp"));

      const optimism = await all({ network: "eip155:10" });
      assert.equal(optimism.length, HTTP_COUNT / 3);
      assert.ok(optimism.every((i) => i.accepts.some((a) => a.network === "eip155:10")));

      // payTo matches whatever case the caller pastes.
      const payB = await all({ payTo: PAY_B.toLowerCase() });
      assert.equal(payB.length, HTTP_COUNT / 2);
      assert.ok(payB.every((i) => i.accepts.some((a) => a.payTo === PAY_B)));

      const both = await all({ network: "eip155:10", payTo: PAY_B, scheme: "exact" });
      assert.deepEqual(
        both.map((i) => i.resource).sort(),
        seeded.filter((_, i) => i < HTTP_COUNT && i % 3 === 0 && i % 2 === 0).sort(),
      );

      assert.equal((await all({ scheme: "upto" })).length, 0);
      assert.equal((await all({ scheme: "exact" })).length, total());
      assert.equal((await all({ network: "eip155:999999999" })).length, 0);

      const withId = await all({ extensions: "payment-identifier" });
      assert.equal(withId.length, HTTP_COUNT / 5);
      assert.equal((await all({ extensions: "bazaar,payment-identifier" })).length, HTTP_COUNT / 5);
      assert.equal((await all({ extensions: "bazaar" })).length, total());
    });

    test("search ranks a word in the name above a tag above the description", async () => {
      const found = await discovery.search({ query: "Aurora" });
      assert.deepEqual(
        found.resources.map((r) => r.resource),
        [
          "https://a.example.org/forecast",
          "https://b.example.org/lights",
          "https://c.example.org/sightings",
        ],
      );
      assert.equal(found.partialResults, false);
      assert.deepEqual(found.pagination, { limit: 20, offset: 0, total: 3, cursor: null });
    });

    test("search stems words, matches URL words and tool names, and combines with filters", async () => {
      const stemmed = await discovery.search({ query: "forecasts of the weathers", limit: 100 });
      const urls = stemmed.resources.map((r) => r.resource);
      assert.ok(urls.includes("https://a.example.org/forecast"), "URL word 'forecast'");
      assert.equal(
        urls.filter((u) => u.endsWith("/api/weather")).length,
        HTTP_COUNT / 3,
        "every weather service",
      );
      const tools = await discovery.search({ query: "tide_tool_3" });
      assert.equal(tools.resources[0]?.resource, "https://mcp3.example.com/mcp");

      const filtered = await discovery.search({ query: "data", network: "eip155:10", limit: 100 });
      assert.equal(filtered.resources.length, HTTP_COUNT / 3);
      assert.ok(
        filtered.resources.every((r: DiscoveryResource) =>
          r.accepts.some((a) => a.network === "eip155:10"),
        ),
      );
      const mcpOnly = await discovery.search({ query: "marine tides data", type: "mcp" });
      assert.equal(mcpOnly.resources.length, MCP_COUNT);

      const nothing = await discovery.search({ query: "the of and" });
      assert.deepEqual(nothing.resources, []);
      assert.deepEqual(nothing.pagination, { limit: 20, offset: 0, total: 0, cursor: null });
    });

    test("search pages with its cursor until the cursor is null", async () => {
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await discovery.search({
          query: "data",
          limit: 4,
          ...(cursor ? { cursor } : {}),
        });
        seen.push(...page.resources.map((r) => r.resource));
        cursor = page.pagination?.cursor ?? undefined;
        pages++;
      } while (cursor);
      assert.equal(seen.length, HTTP_COUNT);
      assert.equal(new Set(seen).size, HTTP_COUNT);
      assert.equal(pages, Math.ceil(HTTP_COUNT / 4));

      const first = await discovery.search({ query: "data", limit: 4 });
      const res = await fetch(
        `${stack.url}/discovery/search?query=weather&cursor=${first.pagination!.cursor!}`,
      );
      assert.equal(res.status, 400);
      const body = (await res.json()) as { error: string; message: string };
      assert.equal(body.error, "invalid_request");
      assert.match(body.message, /cursor belongs to a different search/);
    });

    test("bad parameters are 400 with the envelope and a message naming the parameter", async () => {
      const cases: [string, RegExp][] = [
        ["/discovery/resources?offset=-1", /^offset must be a whole number from 0/],
        ["/discovery/resources?limit=0", /^limit must be a whole number from 1$/],
        ["/discovery/resources?limit=-5", /^limit must be a whole number from 1$/],
        ["/discovery/resources?limit=ten", /^limit must be a whole number/],
        ["/discovery/resources?limit=2.5", /^limit must be a whole number/],
        [
          "/discovery/resources?scheme=fast",
          /^scheme must be one of exact, upto, batch-settlement$/,
        ],
        ["/discovery/resources?network=!!!", /^network must be a CAIP-2 network id/],
        ["/discovery/resources?network=base", /^network must be a CAIP-2 network id/],
        ["/discovery/resources?type=ftp", /^type must be one of http, mcp$/],
        ["/discovery/resources?payTo=a%20b", /^payTo must be an address/],
        ["/discovery/resources?extensions=a,,b", /^extensions must be extension keys/],
        ["/discovery/resources?limit=5&limit=6", /^limit must be given at most once$/],
        ["/discovery/search", /^query is required/],
        ["/discovery/search?query=%20%20", /^query is required/],
        [`/discovery/search?query=${"q".repeat(257)}`, /^query must be at most 256 characters$/],
        ["/discovery/search?query=x&limit=0", /^limit must be a whole number from 1$/],
        [
          "/discovery/search?query=x&offset=1000001",
          /^offset must be a whole number from 0 to 1000000$/,
        ],
        ["/discovery/search?query=x&offset=20&cursor=abc", /^give cursor .* or offset, not both$/],
        ["/discovery/search?query=x&cursor=bogus", /^cursor is not one this service issued/],
      ];
      for (const [path, message] of cases) {
        const res = await fetch(`${stack.url}${path}`);
        assert.equal(res.status, 400, path);
        const body = (await res.json()) as Record<string, string>;
        assert.equal(body["error"], "invalid_request", path);
        assert.match(body["message"]!, message, path);
        assert.match(body["requestId"]!, /^req_/, path);
      }
      // The official client surfaces the 400 as an error carrying the message.
      await assert.rejects(discovery.search({ query: "" }), /\(400\).*query is required/);
      // Empty filter values mean "no filter".
      const lenient = await fetch(`${stack.url}/discovery/resources?network=&type=`);
      assert.equal(lenient.status, 200);
    });

    test("random parameter values never produce a 500 (seeded)", async () => {
      const r = seededRandom(fuzzSeed("catalog reads", 20261123));
      const byte = () => Math.floor(r() * 256);
      const text = (n: number) => Buffer.from(Array.from({ length: n }, byte)).toString("base64");
      const params = [
        "type",
        "payTo",
        "scheme",
        "network",
        "extensions",
        "limit",
        "offset",
        "query",
        "cursor",
      ];
      const values = () => {
        const pick = byte() % 6;
        if (pick === 0) return String(((byte() * 256 + byte() - 32768) * 1000) | 0);
        if (pick === 1) return text(24);
        if (pick === 2) return "%00%ff\u0000'\";--";
        if (pick === 3) return "x".repeat(300);
        if (pick === 4) return encodeURIComponent("é漢字🙂 | & ! :*");
        return "eip155:8453";
      };
      for (let i = 0; i < 120; i++) {
        const path = i % 2 ? "/discovery/search" : "/discovery/resources";
        const qs = params
          .filter(() => byte() % 2 === 0)
          .map((p) => `${p}=${encodeURIComponent(values())}`)
          .join("&");
        const res = await fetch(`${stack.url}${path}?${qs}`);
        assert.ok(
          res.status === 200 || res.status === 400,
          `${res.status} for ${path}?${qs.slice(0, 300)}`,
        );
        await res.arrayBuffer();
      }
    });
  });
}
