/**
 * Filling the catalog through /verify and /settle against a real chain and
 * real databases: entries appear only behind a valid payment, one per
 * resource URL, and every outcome (cataloged, refreshed, unchanged,
 * rejected with its reason) comes back in the EXTENSION-RESPONSES header
 * while the payment verdict itself is untouched.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { sql } from "kysely";
import type { Hex } from "viem";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { declareDiscoveryExtension } from "@x402/extensions/bazaar";
import { startStack, type TestStack } from "../support/stack.js";
import { availableBackends } from "../support/database.js";
import { requirementsFor, signPayment } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";

const PAY_TO = "0x2222222222222222222222222222222222222222" as Hex;

function declaration(): Record<string, unknown> {
  const { bazaar } = declareDiscoveryExtension({
    input: { harbour: "Porto" },
    inputSchema: { properties: { harbour: { type: "string" } }, required: ["harbour"] },
    output: { example: { highTide: "06:12" } },
  });
  const ext = structuredClone(bazaar) as unknown as { info: { input: Record<string, unknown> } };
  ext.info.input["method"] = "GET";
  return ext as unknown as Record<string, unknown>;
}

function decodeHeader(res: Response): Record<string, unknown> | undefined {
  const header = res.headers.get("extension-responses");
  if (header === null) return undefined;
  return JSON.parse(Buffer.from(header, "base64").toString("utf8")) as Record<string, unknown>;
}

for (const backend of availableBackends()) {
  describe(`catalog writes through /verify and /settle (${backend})`, () => {
    let stack: TestStack;
    let payerKey: Hex;

    before(async () => {
      stack = await startStack({ backend });
      payerKey = stack.payerKeys[2]!;
    });
    after(() => stack.stop());

    const requirements = (): PaymentRequirements =>
      requirementsFor({ network: stack.network, usdc: stack.usdc, payTo: PAY_TO, amount: "1500" });

    async function declared(
      resource: Record<string, unknown>,
      bazaar: unknown = declaration(),
      reqs = requirements(),
    ): Promise<{ payload: PaymentPayload; reqs: PaymentRequirements }> {
      const signed = await signPayment(payerKey, reqs);
      return {
        payload: {
          ...signed,
          resource: { mimeType: "application/json", ...resource } as PaymentPayload["resource"],
          extensions: { bazaar },
        },
        reqs,
      };
    }

    async function call(
      path: "/verify" | "/settle",
      p: { payload: PaymentPayload; reqs: PaymentRequirements },
      apiKey = stack.apiKey,
    ) {
      const res = await post(
        stack.url,
        path,
        { x402Version: 2, paymentPayload: p.payload, paymentRequirements: p.reqs },
        apiKey,
      );
      assert.equal(res.status, 200);
      const body = (await res.json()) as Record<string, unknown>;
      return { body, ext: decodeHeader(res) };
    }

    const rowsFor = (resource: string) =>
      stack.service.db
        .selectFrom("catalog_resources")
        .selectAll()
        .where("resource", "=", resource)
        .execute();

    test("a valid /verify catalogs; a repeat is answered from memory; /settle refreshes", async () => {
      const url = "https://tides.example.com/harbours";
      const p = await declared({ url, description: "Tide tables for Atlantic harbours" });

      const first = await call("/verify", p);
      assert.equal(first.body["isValid"], true);
      assert.deepEqual(first.ext, {
        bazaar: { status: "success", action: "cataloged", resource: url },
      });
      const [row] = await rowsFor(url);
      assert.ok(row);
      assert.equal(row.type, "http");
      assert.equal(row.method, "GET");
      assert.equal(row.description, "Tide tables for Atlantic harbours");
      assert.equal(row.account_id, stack.accountId);
      assert.equal(row.last_updated.getTime(), row.cataloged_at.getTime());
      assert.deepEqual(row.accepts, [p.reqs], "the payment kind as the server required it");

      const again = await call("/verify", p);
      assert.deepEqual(again.ext, {
        bazaar: { status: "success", action: "unchanged", resource: url },
      });
      const [unchanged] = await rowsFor(url);
      assert.equal(unchanged!.last_updated.getTime(), row.last_updated.getTime(), "no write");

      const settled = await call("/settle", p);
      assert.equal(settled.body["success"], true);
      assert.deepEqual(settled.ext, {
        bazaar: { status: "success", action: "refreshed", resource: url },
      });
      const [refreshed] = await rowsFor(url);
      assert.ok(refreshed!.last_updated.getTime() > row.last_updated.getTime());
      assert.equal(refreshed!.cataloged_at.getTime(), row.cataloged_at.getTime());
    });

    test("one entry per resource URL: a later payment updates it in place", async () => {
      const url = "https://tides.example.com/moon";
      await call(
        "/verify",
        await declared({ url: `${url}?phase=new`, description: "Moon phases" }),
      );
      const second = await call(
        "/verify",
        await declared({ url: `${url}?phase=full`, description: "Moon phases and tides" }),
      );
      assert.deepEqual(second.ext, {
        bazaar: { status: "success", action: "refreshed", resource: url },
      });
      const rows = await rowsFor(url);
      assert.equal(rows.length, 1);
      assert.equal(rows[0]!.description, "Moon phases and tides");
    });

    test("another account's declaration of the same URL changes nothing: it is a claim for the proof checker", async () => {
      const url = "https://harbour-owner.example.com/tides";
      const owner = await call(
        "/verify",
        await declared({ url, description: "Tide tables by the owner" }),
      );
      assert.deepEqual(owner.ext, {
        bazaar: { status: "success", action: "cataloged", resource: url },
      });
      const listed = async () => {
        const res = await fetch(`${stack.url}/discovery/resources?limit=100`);
        assert.equal(res.status, 200);
        const body = (await res.json()) as {
          items: { resource: string; description?: string; accepts: PaymentRequirements[] }[];
        };
        return body.items.find((i) => i.resource === url);
      };
      const [before] = await rowsFor(url);
      const shownBefore = await listed();
      assert.equal(shownBefore?.description, "Tide tables by the owner");

      // Another account, another payTo, another description: a free /verify
      // of a URL it does not serve.
      const intruder = await createAccount(stack.service.db, "intruder");
      const intruderKey = (await createApiKey(stack.service.db, intruder.id, "intruder")).key;
      const INTRUDER_PAY_TO = "0x3333333333333333333333333333333333333333";
      const takeover = await declared(
        { url, description: "Pay me instead", serviceName: "Not the owner" },
        declaration(),
        requirementsFor({
          network: stack.network,
          usdc: stack.usdc,
          payTo: INTRUDER_PAY_TO,
          amount: "1",
        }),
      );
      for (const path of ["/verify", "/settle"] as const) {
        const attempt = await call(path, takeover, intruderKey);
        assert.equal(
          attempt.body[path === "/verify" ? "isValid" : "success"],
          true,
          "the payment itself is untouched",
        );
        assert.deepEqual(
          attempt.ext?.["bazaar"],
          { status: "processing", resource: url, action: "claimed" },
          `${path}: a claim, naming no owner`,
        );
      }
      const claims = await stack.service.db
        .selectFrom("catalog_claims")
        .select(["account_id", "result"])
        .where("resource", "=", url)
        .execute();
      assert.deepEqual(claims, [{ account_id: intruder.id, result: "pending" }]);

      const after = await rowsFor(url);
      assert.equal(after.length, 1);
      assert.equal(after[0]!.account_id, stack.accountId, "still the owner's");
      assert.equal(after[0]!.description, "Tide tables by the owner");
      assert.equal(after[0]!.service_name, before!.service_name);
      assert.deepEqual(after[0]!.accepts, before!.accepts, "no accept of the intruder's");
      assert.equal(after[0]!.last_updated.getTime(), before!.last_updated.getTime());
      const shownAfter = await listed();
      assert.equal(shownAfter?.description, "Tide tables by the owner");
      assert.deepEqual(
        shownAfter?.accepts.map((a) => a.payTo),
        [PAY_TO],
        "GET /discovery/resources shows the owner's payTo only",
      );

      // The owner still updates its own entry.
      const refreshed = await call(
        "/verify",
        await declared({ url, description: "Tide tables, revised by the owner" }),
      );
      assert.deepEqual(refreshed.ext, {
        bazaar: { status: "success", action: "refreshed", resource: url },
      });
      const [updated] = await rowsFor(url);
      assert.equal(updated!.description, "Tide tables, revised by the owner");
      assert.equal(updated!.account_id, stack.accountId);
    });

    test("a payment that fails to verify or settle is not cataloged", async () => {
      const url = "https://tides.example.com/unpaid";
      const p = await declared({ url, description: "Never paid for" });
      // The server demands more than the payer signed for.
      const tampered = { ...p, reqs: { ...p.reqs, amount: "999999" } };
      const verified = await call("/verify", tampered);
      assert.equal(verified.body["isValid"], false);
      assert.deepEqual(verified.ext, {
        bazaar: {
          status: "rejected",
          rejectedReason:
            "the payment did not verify; resources are cataloged only behind a valid payment",
        },
      });
      const settled = await call("/settle", tampered);
      assert.equal(settled.body["success"], false);
      assert.equal((settled.ext?.["bazaar"] as { status: string }).status, "rejected");
      assert.equal((await rowsFor(url)).length, 0);
    });

    test("oversized or invalid declarations are refused with their reason; the payment stays valid", async () => {
      const oversized = declaration();
      (oversized["info"] as { input: Record<string, unknown> }).input["queryParams"] = {
        harbour: "h".repeat(20_000),
      };
      const mismatched = declaration();
      (mismatched["info"] as { input: Record<string, unknown> }).input["queryParams"] = {
        harbour: 42,
      };
      const cases: [string, Record<string, unknown>, unknown, RegExp][] = [
        [
          "https://tides.example.com/oversized",
          {},
          oversized,
          /^extensions\.bazaar is \d+ bytes; the catalog accepts declarations of at most 16384$/,
        ],
        [
          "https://tides.example.com/mismatch",
          {},
          mismatched,
          /^extensions\.bazaar\.info does not match its schema: .*must be string/,
        ],
        [
          "https://tides.example.com/long",
          { description: "d".repeat(1025) },
          declaration(),
          /^resource\.description is 1025 characters; the catalog accepts at most 1024$/,
        ],
        [
          "ftp://tides.example.com/files",
          {},
          declaration(),
          /^resource\.url must be an http or https URL, not ftp$/,
        ],
        ["https://tides.example.com/not-an-object", {}, ["info"], /must be an object/],
      ];
      for (const [url, resource, bazaar, reason] of cases) {
        const result = await call("/verify", await declared({ url, ...resource }, bazaar));
        assert.equal(result.body["isValid"], true, url);
        const ext = result.ext?.["bazaar"] as { status: string; rejectedReason: string };
        assert.equal(ext.status, "rejected", url);
        assert.match(ext.rejectedReason, reason, url);
        assert.equal((await rowsFor(url)).length, 0, url);
      }
      const total = await stack.service.db
        .selectFrom("catalog_resources")
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .where("resource", "like", "%tides.example.com/%")
        .where("resource", "not in", [
          "https://tides.example.com/harbours",
          "https://tides.example.com/moon",
        ])
        .executeTakeFirstOrThrow();
      assert.equal(Number(total.n), 0);
    });

    test("without a bazaar declaration there is no EXTENSION-RESPONSES header", async () => {
      const reqs = requirements();
      const res = await post(
        stack.url,
        "/verify",
        {
          x402Version: 2,
          paymentPayload: await signPayment(payerKey, reqs),
          paymentRequirements: reqs,
        },
        stack.apiKey,
      );
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("extension-responses"), null);
    });

    test("a catalog failure is reported as rejected and never fails the payment", async () => {
      const url = "https://tides.example.com/outage";
      await sql`ALTER TABLE catalog_resources RENAME TO catalog_resources_away`.execute(
        stack.service.db,
      );
      try {
        const result = await call(
          "/verify",
          await declared({ url, description: "During an outage" }),
        );
        assert.equal(result.body["isValid"], true);
        assert.deepEqual(result.ext, {
          bazaar: {
            status: "rejected",
            rejectedReason:
              "the catalog could not be updated just now; the next payment for this resource will retry",
          },
        });
      } finally {
        await sql`ALTER TABLE catalog_resources_away RENAME TO catalog_resources`.execute(
          stack.service.db,
        );
      }
      const retried = await call(
        "/verify",
        await declared({ url, description: "During an outage" }),
      );
      assert.equal((retried.ext?.["bazaar"] as { action: string }).action, "cataloged");
      assert.equal((await rowsFor(url)).length, 1);
    });
  });
}
