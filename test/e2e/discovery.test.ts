/**
 * The discovery promise, with official packages only: a resource server on
 * `@x402/express` declares the bazaar extension with
 * `declareDiscoveryExtension`; an `@x402/fetch` client pays for it; the
 * resource is then listed and found by a word of its description through
 * `withBazaar(new HTTPFacilitatorClient(...)).extensions.bazaar`. On every
 * database backend available.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { paymentMiddleware } from "@x402/express";
import { HTTPFacilitatorClient, x402ResourceServer } from "@x402/core/server";
import { x402Client } from "@x402/core/client";
import type {
  PaymentPayload,
  PaymentRequirements,
  SettleResponse,
  VerifyResponse,
} from "@x402/core/types";
import { ExactEvmScheme as ExactEvmServerScheme } from "@x402/evm/exact/server";
import { ExactEvmScheme as ExactEvmClientScheme } from "@x402/evm/exact/client";
import { declareDiscoveryExtension, withBazaar } from "@x402/extensions/bazaar";
import { wrapFetchWithPayment } from "@x402/fetch";
import { privateKeyToAccount } from "viem/accounts";
import { apiKeyAuth, listenOnLoopback, type Listening } from "../support/resourceServer.js";
import { startStack, type TestStack } from "../support/stack.js";
import { availableBackends } from "../support/database.js";

const PAY_TO = "0x000000000000000000000000000000000000bEEF" as const;

/** The official facilitator client, keeping what it decoded from EXTENSION-RESPONSES. */
class RecordingFacilitatorClient extends HTTPFacilitatorClient {
  readonly verified: VerifyResponse[] = [];
  readonly settled: SettleResponse[] = [];
  override async verify(p: PaymentPayload, r: PaymentRequirements): Promise<VerifyResponse> {
    const result = await super.verify(p, r);
    this.verified.push(result);
    return result;
  }
  override async settle(p: PaymentPayload, r: PaymentRequirements): Promise<SettleResponse> {
    const result = await super.settle(p, r);
    this.settled.push(result);
    return result;
  }
}

for (const backend of availableBackends()) {
  describe(`discovery end to end (${backend})`, () => {
    let stack: TestStack;
    let server: Listening | undefined;
    let origin: string;
    let facilitator: RecordingFacilitatorClient;

    before(async () => {
      stack = await startStack({ backend });
      facilitator = new RecordingFacilitatorClient({
        url: stack.url,
        createAuthHeaders: apiKeyAuth(stack.apiKey),
      });
      const resourceServer = new x402ResourceServer(facilitator).register(
        "eip155:8453",
        new ExactEvmServerScheme(),
      );
      const accepts = {
        scheme: "exact",
        price: "$0.002",
        network: "eip155:8453",
        payTo: PAY_TO,
      } as const;
      const app = express();
      app.use(
        paymentMiddleware(
          {
            "GET /tides": {
              accepts,
              description: "Hourly tide tables for coastal harbours",
              mimeType: "application/json",
              serviceName: "Harbour Almanac",
              tags: ["tides", "marine"],
              extensions: declareDiscoveryExtension({
                input: { harbour: "Lisbon" },
                inputSchema: {
                  properties: { harbour: { type: "string" } },
                  required: ["harbour"],
                },
                output: { example: { highTide: "06:12", lowTide: "12:31" } },
              }),
            },
            // Paid but not declared: must not be cataloged.
            "GET /private": {
              accepts,
              description: "Unlisted harbour master notes",
              mimeType: "application/json",
            },
          },
          resourceServer,
        ),
      );
      app.get("/tides", (_req, res) => {
        res.json({ highTide: "06:12", lowTide: "12:31" });
      });
      app.get("/private", (_req, res) => {
        res.json({ notes: "none" });
      });
      server = await listenOnLoopback(app);
      origin = `${server.origin}`;
    });

    after(async () => {
      await server?.close();
      await stack.stop();
    });

    test("GET /supported advertises the bazaar extension", async () => {
      const supported = await new HTTPFacilitatorClient({ url: stack.url }).getSupported();
      assert.ok(supported.extensions.includes("bazaar"));
    });

    test("the catalog starts empty", async () => {
      const discovery = withBazaar(new HTTPFacilitatorClient({ url: stack.url }));
      const page = await discovery.extensions.bazaar.listResources();
      assert.deepEqual(page, {
        x402Version: 2,
        items: [],
        pagination: { limit: 20, offset: 0, total: 0 },
      });
    });

    test("a paid, declared resource is cataloged and found by a word of its description", async () => {
      const payer = privateKeyToAccount(stack.payerKeys[1]!);
      const client = new x402Client().register("eip155:*", new ExactEvmClientScheme(payer));
      const payingFetch = wrapFetchWithPayment(fetch, client);

      const paid = await payingFetch(`${origin}/tides?harbour=Lisbon`);
      assert.equal(paid.status, 200);
      assert.deepEqual(await paid.json(), { highTide: "06:12", lowTide: "12:31" });
      const unlisted = await payingFetch(`${origin}/private`);
      assert.equal(unlisted.status, 200);

      // The resource server's facilitator client decoded our EXTENSION-RESPONSES.
      const declared = facilitator.verified[0]!;
      assert.equal(declared.isValid, true);
      assert.deepEqual(declared.extensionResponses, {
        bazaar: { status: "success", action: "cataloged", resource: `${origin}/tides` },
      });
      assert.deepEqual(facilitator.settled[0]!.extensionResponses, {
        bazaar: { status: "success", action: "refreshed", resource: `${origin}/tides` },
      });
      assert.equal(facilitator.verified[1]!.extensionResponses, undefined);

      const discovery = withBazaar(new HTTPFacilitatorClient({ url: stack.url }));
      const listed = await discovery.extensions.bazaar.listResources();
      assert.equal(listed.pagination.total, 1);
      const item = listed.items[0]!;
      assert.equal(item.resource, `${origin}/tides`);
      assert.equal(item.type, "http");
      assert.equal(item.x402Version, 2);
      assert.equal(item.description, "Hourly tide tables for coastal harbours");
      assert.equal(item.mimeType, "application/json");
      assert.equal(item.serviceName, "Harbour Almanac");
      assert.deepEqual(item.tags, ["tides", "marine"]);
      assert.equal(item.accepts.length, 1);
      const accept = item.accepts[0]!;
      assert.equal(accept.scheme, "exact");
      assert.equal(accept.network, "eip155:8453");
      assert.equal(accept.amount, "2000");
      assert.equal(accept.payTo, PAY_TO);
      assert.equal(accept.asset.toLowerCase(), stack.usdc.toLowerCase());
      assert.ok(!Number.isNaN(Date.parse(item.lastUpdated)));
      const bazaar = item.extensions?.["bazaar"] as {
        info: { input: { method: string; queryParams: unknown } };
      };
      assert.equal(bazaar.info.input.method, "GET");
      assert.deepEqual(bazaar.info.input.queryParams, { harbour: "Lisbon" });

      const found = await discovery.extensions.bazaar.search({ query: "coastal" });
      assert.deepEqual(
        found.resources.map((r) => r.resource),
        [`${origin}/tides`],
      );
      assert.deepEqual(found.pagination, { limit: 20, offset: 0, total: 1, cursor: null });
      const none = await discovery.extensions.bazaar.search({ query: "harbour master notes" });
      assert.ok(!none.resources.some((r) => r.resource === `${origin}/private`));

      // One row, attributed to the API key's account, refreshed by the settle.
      const rows = await stack.service.db.selectFrom("catalog_resources").selectAll().execute();
      assert.equal(rows.length, 1);
      const row = rows[0]!;
      assert.equal(row.resource, `${origin}/tides`);
      assert.equal(row.account_id, stack.accountId);
      assert.deepEqual(row.extension_keys, ["bazaar"]);
      assert.ok(row.last_updated.getTime() > row.cataloged_at.getTime(), "settle refreshed it");
    });
  });
}
