/**
 * Who owns a catalog entry (issue 68): the account the resource's own 402
 * names, not the first account to /verify a payment for its URL.
 *
 * A merchant runs a resource server on the official `@x402/express`
 * `paymentMiddleware` (on loopback: the devnet allows private targets, as
 * webhook tests allow theirs), paid through this service with its own API
 * key. A squatter catalogs the merchant's URL first with a free /verify of
 * a self-payment. The proof checker (what the background worker runs) then
 * gives the entry to the merchant; a resource that stops answering 402
 * goes stale and leaves the listing; a challenge on the origin beats a
 * payTo anyone can pay; and no fetch ever reaches a private address when
 * the SSRF guard is on. On every database backend available.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import { paymentMiddleware } from "@x402/express";
import { HTTPFacilitatorClient, x402ResourceServer } from "@x402/core/server";
import { x402Client } from "@x402/core/client";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { ExactEvmScheme as ExactEvmServerScheme } from "@x402/evm/exact/server";
import { ExactEvmScheme as ExactEvmClientScheme } from "@x402/evm/exact/client";
import { declareDiscoveryExtension } from "@x402/extensions/bazaar";
import { wrapFetchWithPayment } from "@x402/fetch";
import { privateKeyToAccount } from "viem/accounts";
import { apiKeyAuth, listenOnLoopback, type Listening } from "../support/resourceServer.js";
import { startStack, type TestStack } from "../support/stack.js";
import { availableBackends } from "../support/database.js";
import { signedInUser, type DashboardUser } from "../support/dashboardSession.js";
import { post } from "../support/http.js";
import { signPayment } from "../chains/evm/payments.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { createLogger } from "../../src/lib/logger.js";
import {
  OwnershipChecker,
  type OwnershipCheckerOptions,
} from "../../src/features/catalog/ownershipChecker.js";
import {
  REFUSED_TARGET,
  probeResource,
  type ProbeOptions,
} from "../../src/features/catalog/resourceProbe.js";
import type { CatalogOverview } from "../../src/features/catalog/ownershipView.js";

const MERCHANT_PAY_TO = "0x00000000000000000000000000000000000C0FFe";
const SQUATTER_PAY_TO = "0x0000000000000000000000000000000000005a0a";

interface Listed {
  resource: string;
  description?: string;
  accepts: PaymentRequirements[];
}

/** A loopback server that counts the requests it gets. */
async function countingServer(
  handle: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ origin: string; port: number; hits: () => number; close(): Promise<void> }> {
  let hits = 0;
  const server: Server = createServer((req, res) => {
    hits++;
    handle(req, res);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    origin: `http://127.0.0.1:${port}`,
    port,
    hits: () => hits,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

for (const backend of availableBackends()) {
  describe(`catalog ownership proven by the resource (${backend})`, () => {
    let stack: TestStack;
    let server: Listening | undefined;
    let origin: string;
    let merchant: DashboardUser;
    let squatter: DashboardUser;
    let merchantKey: string;
    let squatterKey: string;
    /** The merchant's server: 503 instead of its 402 while true. */
    let down = false;
    /** What the merchant publishes at /.well-known/x402-catalog (404 while undefined). */
    let published: string | undefined;
    const log = createLogger("silent");

    /** A checker as the worker runs it, with the test's own clock settings. */
    const checker = (over: Partial<OwnershipCheckerOptions> = {}) =>
      new OwnershipChecker(stack.service.db, {
        allowPrivateTargets: true,
        log,
        onChange: () => stack.service.catalog.invalidateReads(),
        ...over,
      });

    const listed = async (url: string): Promise<Listed | undefined> => {
      const res = await fetch(`${stack.url}/discovery/resources?limit=100`);
      assert.equal(res.status, 200);
      const body = (await res.json()) as { items: Listed[] };
      return body.items.find((i) => i.resource === url);
    };

    const overview = async (user: DashboardUser): Promise<CatalogOverview> => {
      const res = await user.call("/api/catalog");
      assert.equal(res.status, 200);
      return (await res.json()) as CatalogOverview;
    };

    /**
     * What a squatter does: reads the merchant's own 402 for the URL, and
     * pays itself (or whoever `payTo` is) one unit for it with a bazaar
     * declaration of the merchant's URL and its own description.
     */
    async function squat(
      url: string,
      path: "/verify" | "/settle",
      payTo: string,
      description: string,
    ): Promise<{ body: Record<string, unknown>; bazaar: unknown }> {
      const answer = await fetch(url);
      assert.equal(answer.status, 402);
      const required = JSON.parse(
        Buffer.from(answer.headers.get("payment-required")!, "base64").toString("utf8"),
      ) as { accepts: PaymentRequirements[]; extensions?: Record<string, unknown> };
      const reqs: PaymentRequirements = { ...required.accepts[0]!, payTo, amount: "1" };
      const signed = await signPayment(stack.payerKeys[2]!, reqs);
      const payload: PaymentPayload = {
        ...signed,
        resource: { url, description, mimeType: "application/json" },
        extensions: { bazaar: required.extensions!["bazaar"] },
      };
      const res = await post(
        stack.url,
        path,
        { x402Version: 2, paymentPayload: payload, paymentRequirements: reqs },
        squatterKey,
      );
      assert.equal(res.status, 200);
      const header = res.headers.get("extension-responses");
      const ext = header
        ? (JSON.parse(Buffer.from(header, "base64").toString("utf8")) as Record<string, unknown>)
        : {};
      return { body: (await res.json()) as Record<string, unknown>, bazaar: ext["bazaar"] };
    }

    /** A customer of the merchant pays for `path` with the official client. */
    async function customerPays(path: string): Promise<void> {
      const client = new x402Client().register(
        "eip155:*",
        new ExactEvmClientScheme(privateKeyToAccount(stack.payerKeys[1]!)),
      );
      const paid = await wrapFetchWithPayment(fetch, client)(`${origin}${path}`);
      assert.equal(paid.status, 200, await paid.clone().text());
      await paid.arrayBuffer();
    }

    before(async () => {
      stack = await startStack({ backend });
      // The test runs the checks itself, when it means to.
      await stack.service.workers.catalogProofs?.stop();
      const db = stack.service.db;
      merchant = await signedInUser(db, stack.url, "merchant@example.test");
      squatter = await signedInUser(db, stack.url, "squatter@example.test");
      merchantKey = (await createApiKey(db, merchant.accountId, "merchant")).key;
      squatterKey = (await createApiKey(db, squatter.accountId, "squatter")).key;

      const facilitator = new HTTPFacilitatorClient({
        url: stack.url,
        createAuthHeaders: apiKeyAuth(merchantKey),
      });
      const resourceServer = new x402ResourceServer(facilitator).register(
        stack.network as `${string}:${string}`,
        new ExactEvmServerScheme(),
      );
      const accepts = {
        scheme: "exact",
        price: "$0.001",
        network: stack.network as `${string}:${string}`,
        payTo: MERCHANT_PAY_TO,
      } as const;
      const declared = (what: string) =>
        declareDiscoveryExtension({
          input: { port: "Lisbon" },
          inputSchema: { properties: { port: { type: "string" } }, required: ["port"] },
          output: { example: { [what]: "calm" } },
        });
      const app = express();
      app.get("/.well-known/x402-catalog", (_req, res) => {
        if (published === undefined) res.status(404).end();
        else res.type("text/plain").send(`# accounts allowed to list this origin\n${published}\n`);
      });
      app.use((_req, res, next) => {
        if (down) res.status(503).send("down for maintenance");
        else next();
      });
      app.use(
        paymentMiddleware(
          {
            "GET /forecast": {
              accepts,
              description: "Marine forecasts from the merchant",
              mimeType: "application/json",
              extensions: declared("sea"),
            },
            "GET /tides": {
              accepts,
              description: "Tide tables from the merchant",
              mimeType: "application/json",
              extensions: declared("tide"),
            },
          },
          resourceServer,
        ),
      );
      app.get("/forecast", (_req, res) => void res.json({ sea: "calm" }));
      app.get("/tides", (_req, res) => void res.json({ tide: "high" }));
      server = await listenOnLoopback(app);
      origin = server.origin;
    });

    after(async () => {
      await server?.close();
      await stack.stop();
    });

    test("a squatter's free /verify catalogs the merchant's URL first, unproven, with the squatter's payTo", async () => {
      const url = `${origin}/forecast`;
      const first = await squat(url, "/verify", SQUATTER_PAY_TO, "Pay the squatter");
      assert.equal(first.body["isValid"], true);
      assert.deepEqual(first.bazaar, { status: "success", action: "cataloged", resource: url });

      // Before any proof: what the catalog shows is the squatter's.
      const shown = await listed(url);
      assert.equal(shown?.description, "Pay the squatter");
      assert.deepEqual(
        shown?.accepts.map((a) => a.payTo),
        [SQUATTER_PAY_TO],
      );

      // The resource names the merchant's payTo, which the squatter never paid.
      const outcome = await checker().check(url);
      assert.equal(outcome?.answered402, true);
      assert.equal(outcome?.state, "unproven");
      assert.equal(outcome?.ownerAccountId, squatter.accountId);
      assert.equal(outcome?.takeover, undefined);
      const mine = (await overview(squatter)).entries.find((e) => e.resource === url);
      assert.equal(mine?.state, "unproven");
      assert.equal(mine?.listed, true);
    });

    test("the merchant's paid customers prove the merchant: it takes the entry over, and both accounts see it", async () => {
      const url = `${origin}/forecast`;
      await customerPays("/forecast");
      // The merchant's declaration was a claim; the entry is still the squatter's.
      const claim = await stack.service.db
        .selectFrom("catalog_claims")
        .select(["account_id", "result"])
        .where("resource", "=", url)
        .execute();
      assert.deepEqual(claim, [{ account_id: merchant.accountId, result: "pending" }]);
      assert.equal((await listed(url))?.description, "Pay the squatter");
      assert.deepEqual(
        (await overview(merchant)).claims.map((c) => [c.resource, c.result]),
        [[url, "pending"]],
      );

      const outcome = await checker().check(url);
      assert.deepEqual(outcome?.takeover, {
        from: squatter.accountId,
        to: merchant.accountId,
        proof: "pay_to",
      });
      assert.equal(outcome?.state, "proven");

      // The listing now shows the merchant's description and payTo only.
      const shown = await listed(url);
      assert.equal(shown?.description, "Marine forecasts from the merchant");
      assert.deepEqual(
        shown?.accepts.map((a) => a.payTo),
        [MERCHANT_PAY_TO],
      );
      const found = (await (
        await fetch(`${stack.url}/discovery/search?query=forecasts`)
      ).json()) as { resources: Listed[] };
      assert.deepEqual(
        found.resources.find((r) => r.resource === url)?.accepts.map((a) => a.payTo),
        [MERCHANT_PAY_TO],
      );

      // Both accounts see the takeover; neither is named to the other.
      const gained = await overview(merchant);
      assert.deepEqual(
        gained.entries.filter((e) => e.resource === url).map((e) => [e.state, e.proof, e.listed]),
        [["proven", "pay_to", true]],
      );
      assert.deepEqual(gained.claims, [], "no longer a claim: the merchant's entry");
      const gainedEvent = gained.events.find((e) => e.kind === "takeover" && e.resource === url);
      assert.equal(gainedEvent?.role, "gained");
      const lost = await overview(squatter);
      assert.equal(
        lost.entries.some((e) => e.resource === url),
        false,
      );
      const lostEvent = lost.events.find((e) => e.kind === "takeover" && e.resource === url);
      assert.equal(lostEvent?.role, "lost");
      assert.doesNotMatch(JSON.stringify(lost), new RegExp(merchant.accountId));
      assert.doesNotMatch(JSON.stringify(gained), new RegExp(squatter.accountId));
    });

    test("the squatter cannot take it back, even by paying the merchant's payTo: between equal proofs the owner keeps it", async () => {
      const url = `${origin}/forecast`;
      const again = await squat(url, "/verify", SQUATTER_PAY_TO, "Pay the squatter, again");
      assert.deepEqual(again.bazaar, { status: "processing", resource: url, action: "claimed" });
      await checker().check(url);
      const verdict = async () =>
        (await overview(squatter)).claims.find((c) => c.resource === url)?.result;
      assert.equal(await verdict(), "not_proven");

      // A real settle to the merchant's payTo: the squatter now "pays" it too.
      const settled = await squat(url, "/settle", MERCHANT_PAY_TO, "Pay the squatter, settled");
      assert.equal(settled.body["success"], true);
      const outcome = await checker().check(url);
      assert.equal(outcome?.takeover, undefined);
      assert.equal(outcome?.ownerAccountId, merchant.accountId);
      assert.equal(await verdict(), "owner_holds");
      assert.equal((await listed(url))?.description, "Marine forecasts from the merchant");
    });

    test("a challenge published on the origin beats a payTo anyone can pay", async () => {
      const url = `${origin}/tides`;
      // The squatter is first again, and this time settles to the merchant's
      // payTo before the merchant's customers ever paid for /tides.
      const first = await squat(url, "/settle", MERCHANT_PAY_TO, "Tides, by the squatter");
      assert.equal(first.body["success"], true);
      const held = await checker().check(url);
      assert.equal(held?.ownerAccountId, squatter.accountId);
      assert.equal(held?.proof, "pay_to");
      assert.equal(held?.state, "proven");

      await customerPays("/tides");
      const tie = await checker().check(url);
      assert.equal(tie?.takeover, undefined, "a payTo against a payTo: the holder keeps it");

      // The merchant publishes its challenge on the origin.
      const res = await merchant.call("/api/catalog/challenge", { method: "POST" });
      assert.equal(res.status, 200);
      const challenge = (await res.json()) as { path: string; token: string };
      assert.equal(challenge.path, "/.well-known/x402-catalog");
      assert.match(challenge.token, /^x402-catalog-[A-Za-z0-9_-]{32}$/);
      const same = (await (
        await merchant.call("/api/catalog/challenge", { method: "POST" })
      ).json()) as { token: string };
      assert.equal(same.token, challenge.token, "one token per account");
      published = challenge.token;

      const outcome = await checker().check(url);
      assert.deepEqual(outcome?.takeover, {
        from: squatter.accountId,
        to: merchant.accountId,
        proof: "challenge",
      });
      assert.equal((await listed(url))?.description, "Tide tables from the merchant");
      // A payTo proof cannot take a challenge-proven entry back.
      await squat(url, "/settle", MERCHANT_PAY_TO, "Tides, by the squatter");
      assert.equal((await checker().check(url))?.takeover, undefined);
      published = undefined;
    });

    test("a resource that stops answering 402 goes stale and leaves the listing, and comes back when it answers again", async () => {
      const url = `${origin}/forecast`;
      down = true;
      try {
        // Within the documented period (24 h by default): still listed.
        const early = await checker().check(url);
        assert.equal(early?.answered402, false);
        assert.equal(early?.error, "answered HTTP 503, not 402");
        assert.equal(early?.state, "proven", "what was proven stays proven while it is down");
        assert.ok(await listed(url));

        // Past it: stale, out of the listing and the search.
        const late = await checker({ staleAfterMs: 0 }).check(url);
        assert.equal(late?.state, "stale");
        assert.equal(await listed(url), undefined);
        const search = (await (
          await fetch(`${stack.url}/discovery/search?query=forecasts`)
        ).json()) as { resources: Listed[] };
        assert.equal(
          search.resources.some((r) => r.resource === url),
          false,
        );
        const view = await overview(merchant);
        const entry = view.entries.find((e) => e.resource === url);
        assert.equal(entry?.state, "stale");
        assert.equal(entry?.listed, false);
        assert.equal(entry?.lastCheckError, "answered HTTP 503, not 402");
        assert.ok(view.events.some((e) => e.kind === "stale" && e.resource === url));
        // Stale stays stale while it does not answer, whatever the period.
        assert.equal((await checker().check(url))?.state, "stale");
      } finally {
        down = false;
      }
      const back = await checker({ staleAfterMs: 0 }).check(url);
      assert.equal(back?.state, "proven");
      assert.ok(await listed(url));
      assert.ok(
        (await overview(merchant)).events.some(
          (e) => e.kind === "listed_again" && e.resource === url,
        ),
      );
    });

    test("the background worker checks what is due: a new claim brings the entry's check forward", async () => {
      const url = `${origin}/forecast`;
      // Nothing is due right after a check.
      const worker = checker();
      assert.deepEqual(await worker.runDue(), []);
      const asked = await squatter.call("/api/catalog/check", {
        method: "POST",
        body: { resource: url },
      });
      assert.equal(asked.status, 200, "the squatter still claims it");
      const unrelated = await squatter.call("/api/catalog/check", {
        method: "POST",
        body: { resource: `${origin}/nothing` },
      });
      assert.equal(unrelated.status, 404);
      // The last check was just now: the next is five minutes on, not sooner.
      const { nextCheckAt } = (await asked.json()) as { nextCheckAt: string };
      assert.ok(Date.parse(nextCheckAt) > Date.now() + 4 * 60_000);
      await stack.service.db
        .updateTable("catalog_resources")
        .set({ last_check_at: new Date(Date.now() - 10 * 60_000) })
        .where("resource", "=", url)
        .execute();
      const now = await squatter.call("/api/catalog/check", {
        method: "POST",
        body: { resource: url },
      });
      assert.ok(
        Date.parse(((await now.json()) as { nextCheckAt: string }).nextCheckAt) <= Date.now(),
      );
      const checked = await worker.runDue();
      assert.deepEqual(
        checked.map((c) => [c.resource, c.ownerAccountId]),
        [[url, merchant.accountId]],
      );
      assert.deepEqual(await worker.runDue(), [], "checked once, then due hours later");
    });

    test("with the SSRF guard on (production mode) the proof never reaches a private address", async () => {
      const target = await countingServer((_req, res) => {
        res.writeHead(402, { "content-type": "application/json" });
        res.end(JSON.stringify({ accepts: [{ network: stack.network, payTo: MERCHANT_PAY_TO }] }));
      });
      try {
        const guarded: ProbeOptions = {
          allowPrivateTargets: false,
          timeoutMs: 2_000,
          maxBytes: 4096,
        };
        const refused = [
          `${target.origin}/x`,
          `http://localhost:${target.port}/x`,
          `http://[::1]:${target.port}/x`,
          `http://[::ffff:127.0.0.1]:${target.port}/x`,
          `http://0.0.0.0:${target.port}/x`,
          "http://10.0.0.1/x",
          "http://169.254.169.254/latest/meta-data/",
          "http://192.168.1.1/x",
          "http://172.16.0.1/x",
          "http://100.64.0.1/x",
          "http://[fd00::1]/x",
          "http://[fe80::1]/x",
          "http://[64:ff9b::a00:1]/x",
        ];
        for (const url of refused) {
          assert.deepEqual(
            await probeResource(url, "GET", guarded),
            { answered402: false, error: REFUSED_TARGET },
            url,
          );
        }
        assert.equal(target.hits(), 0, "not one request reached the private server");

        // The whole check, of an entry on a loopback resource, in production mode.
        const production = checker({ allowPrivateTargets: false });
        const outcome = await production.check(`${origin}/forecast`);
        assert.equal(outcome?.answered402, false);
        assert.equal(outcome?.error, REFUSED_TARGET);
        assert.equal(outcome?.state, "proven", "nothing learned, nothing changed");

        // The same server is reached when private targets are allowed (devnet).
        const open = await probeResource(`${target.origin}/x`, "GET", {
          ...guarded,
          allowPrivateTargets: true,
        });
        assert.deepEqual(open, {
          answered402: true,
          offers: [{ network: stack.network, payTo: MERCHANT_PAY_TO }],
        });
        assert.equal(target.hits(), 1);
      } finally {
        await target.close();
      }
    });

    test("redirects are not followed, slow resources time out, and only so much of a body is read", async () => {
      const inner = await countingServer((_req, res) => {
        res.writeHead(402, { "content-type": "application/json" });
        res.end(JSON.stringify({ accepts: [{ network: stack.network, payTo: MERCHANT_PAY_TO }] }));
      });
      const redirecting = await countingServer((_req, res) => {
        res.writeHead(302, { location: `${inner.origin}/x` });
        res.end();
      });
      const silent = await countingServer(() => undefined);
      const header = Buffer.from(
        JSON.stringify({ x402Version: 2, accepts: [{ network: "eip155:10", payTo: "0xHeader" }] }),
      ).toString("base64");
      const huge = await countingServer((_req, res) => {
        res.writeHead(402, { "content-type": "application/json", "payment-required": header });
        // A body far past the limit, that would name another payTo.
        res.end(
          JSON.stringify({
            accepts: [{ network: "eip155:10", payTo: "0xBody" }],
            pad: "x".repeat(1 << 20),
          }),
        );
      });
      const open: ProbeOptions = { allowPrivateTargets: true, timeoutMs: 300, maxBytes: 4096 };
      try {
        assert.deepEqual(await probeResource(`${redirecting.origin}/x`, "GET", open), {
          answered402: false,
          error: "answered HTTP 302, not 402",
        });
        assert.equal(inner.hits(), 0, "the redirect's target was never fetched");

        const started = Date.now();
        const slow = await probeResource(`${silent.origin}/x`, "GET", open);
        assert.equal(slow.answered402, false);
        assert.ok(Date.now() - started < 3_000, "gave up at the timeout");

        assert.deepEqual(await probeResource(`${huge.origin}/x`, "GET", open), {
          answered402: true,
          offers: [{ network: "eip155:10", payTo: "0xHeader" }],
        });
      } finally {
        for (const s of [inner, redirecting, silent, huge]) await s.close();
      }
    });
  });
}
