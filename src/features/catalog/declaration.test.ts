import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { declareDiscoveryExtension } from "@x402/extensions/bazaar";
import { readDeclaration, type CatalogDraft, type Declaration } from "./declaration.js";
import { MAX_DECLARATION_BYTES, MAX_DESCRIPTION_LENGTH } from "./limits.js";

const requirements: PaymentRequirements = {
  scheme: "exact",
  network: "eip155:8453",
  asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
  amount: "1000",
  payTo: "0x000000000000000000000000000000000000dEaD",
  maxTimeoutSeconds: 60,
  extra: { name: "USD Coin", version: "2" },
};

/** A GET declaration as the resource server's bazaar extension sends it (method filled in). */
function getDeclaration(): Record<string, unknown> {
  const { bazaar } = declareDiscoveryExtension({
    input: { city: "Lisbon" },
    inputSchema: { properties: { city: { type: "string" } }, required: ["city"] },
    output: { example: { temperature: 21 } },
  });
  const ext = structuredClone(bazaar) as unknown as { info: { input: Record<string, unknown> } };
  ext.info.input["method"] = "GET";
  return ext as unknown as Record<string, unknown>;
}

function payload(overrides: {
  resource?: Record<string, unknown> | undefined;
  extensions?: Record<string, unknown> | undefined;
}): PaymentPayload {
  return {
    x402Version: 2,
    accepted: requirements,
    payload: {},
    resource: {
      url: "https://api.example.com/weather?city=Lisbon",
      description: "Current weather by city",
      mimeType: "application/json",
      ...overrides.resource,
    },
    extensions: "extensions" in overrides ? overrides.extensions : { bazaar: getDeclaration() },
  } as PaymentPayload;
}

const publicOnly = { allowPrivateHosts: false };

function accepted(d: Declaration): CatalogDraft {
  assert.equal(d.kind, "accepted", d.kind === "rejected" ? d.reason : "");
  return (d as { draft: CatalogDraft }).draft;
}

function rejected(d: Declaration): string {
  assert.equal(d.kind, "rejected");
  return (d as { reason: string }).reason;
}

describe("readDeclaration", () => {
  test("a payload without the bazaar extension is not a declaration", () => {
    assert.deepEqual(
      readDeclaration(payload({ extensions: undefined }), requirements, publicOnly),
      {
        kind: "absent",
      },
    );
    assert.deepEqual(
      readDeclaration(
        payload({ extensions: { "payment-identifier": {} } }),
        requirements,
        publicOnly,
      ),
      { kind: "absent" },
    );
  });

  test("a valid declaration becomes a draft with the canonical URL and the payment kind", () => {
    const draft = accepted(
      readDeclaration(
        payload({
          resource: { serviceName: "Weatherly", tags: ["weather", "Weather", "forecast"] },
          extensions: { bazaar: getDeclaration(), "payment-identifier": { id: "x" } },
        }),
        requirements,
        publicOnly,
      ),
    );
    assert.equal(draft.resource, "https://api.example.com/weather");
    assert.equal(draft.type, "http");
    assert.equal(draft.toolName, "");
    assert.equal(draft.method, "GET");
    assert.equal(draft.description, "Current weather by city");
    assert.equal(draft.mimeType, "application/json");
    assert.equal(draft.serviceName, "Weatherly");
    // The official sanitizer dedupes tags case-insensitively.
    assert.deepEqual(draft.tags, ["weather", "forecast"]);
    assert.deepEqual(draft.accept, requirements);
    assert.deepEqual(draft.extensionKeys, ["bazaar", "payment-identifier"]);
    assert.deepEqual(draft.bazaar.info, getDeclaration()["info"]);
    // The proof checker fetches the URL paid for, without its query.
    assert.equal(draft.probeUrl, "https://api.example.com/weather");
  });

  test("service metadata that breaks the official rules is dropped, not fatal", () => {
    const draft = accepted(
      readDeclaration(
        payload({
          resource: {
            serviceName: "x".repeat(40),
            tags: ["ok", "", "\u0007bell"],
            iconUrl: "http://127.0.0.1/icon.png",
          },
        }),
        requirements,
        publicOnly,
      ),
    );
    assert.equal(draft.serviceName, undefined);
    assert.deepEqual(draft.tags, ["ok"]);
    assert.equal(draft.iconUrl, undefined);
  });

  test("a valid route template becomes the catalog key; an invalid one falls back to the path", () => {
    const withTemplate = { ...getDeclaration(), routeTemplate: "/users/:id" };
    const good = accepted(
      readDeclaration(
        payload({
          resource: { url: "https://api.example.com/users/42" },
          extensions: { bazaar: withTemplate },
        }),
        requirements,
        publicOnly,
      ),
    );
    assert.equal(good.resource, "https://api.example.com/users/:id");
    assert.equal(good.bazaar.routeTemplate, "/users/:id");
    assert.equal(good.probeUrl, "https://api.example.com/users/42", "a concrete path to fetch");

    const hostile = { ...getDeclaration(), routeTemplate: "/users/%2e%2e/admin" };
    const fallback = accepted(
      readDeclaration(
        payload({
          resource: { url: "https://api.example.com/users/42" },
          extensions: { bazaar: hostile },
        }),
        requirements,
        publicOnly,
      ),
    );
    assert.equal(fallback.resource, "https://api.example.com/users/42");
    assert.equal(fallback.bazaar.routeTemplate, undefined);
  });

  test("an MCP tool is keyed by its tool name and described by it when resource has no description", () => {
    const { bazaar } = declareDiscoveryExtension({
      toolName: "tide_forecast",
      description: "Tide forecast for a harbour",
      inputSchema: { type: "object", properties: { harbour: { type: "string" } } },
    });
    const draft = accepted(
      readDeclaration(
        payload({
          resource: { url: "https://mcp.example.com/mcp", description: undefined },
          extensions: { bazaar },
        }),
        requirements,
        publicOnly,
      ),
    );
    assert.equal(draft.type, "mcp");
    assert.equal(draft.toolName, "tide_forecast");
    assert.equal(draft.description, "Tide forecast for a harbour");
  });

  test("malformed declarations are refused with a reason", () => {
    assert.match(
      rejected(
        readDeclaration(payload({ extensions: { bazaar: "yes" } }), requirements, publicOnly),
      ),
      /must be an object with an info object and a schema object/,
    );
    const wrongType = getDeclaration();
    (wrongType["info"] as { input: Record<string, unknown> }).input["type"] = "ftp";
    assert.match(
      rejected(
        readDeclaration(payload({ extensions: { bazaar: wrongType } }), requirements, publicOnly),
      ),
      /does not follow the bazaar spec: info\.input\.type must be "http" or "mcp"/,
    );
    const mismatch = getDeclaration();
    (mismatch["info"] as { input: Record<string, unknown> }).input["queryParams"] = { city: 7 };
    assert.match(
      rejected(
        readDeclaration(payload({ extensions: { bazaar: mismatch } }), requirements, publicOnly),
      ),
      /info does not match its schema: .*must be string/,
    );
    const external = getDeclaration();
    (external["schema"] as Record<string, unknown>)["$ref"] = "https://evil.example/schema.json";
    assert.match(
      rejected(
        readDeclaration(payload({ extensions: { bazaar: external } }), requirements, publicOnly),
      ),
      /external \$ref/,
    );
  });

  test("schemas with regular expressions are refused", () => {
    const { bazaar } = declareDiscoveryExtension({
      input: { zip: "12345" },
      inputSchema: { properties: { zip: { type: "string", pattern: "^(a+)+$" } } },
    });
    const ext = structuredClone(bazaar) as unknown as { info: { input: Record<string, unknown> } };
    ext.info.input["method"] = "GET";
    assert.match(
      rejected(readDeclaration(payload({ extensions: { bazaar: ext } }), requirements, publicOnly)),
      /uses keyword "pattern"/,
    );
  });

  test("oversized declarations and metadata are refused with their size", () => {
    const big = getDeclaration();
    (big["info"] as { input: Record<string, unknown> }).input["queryParams"] = {
      city: "x".repeat(MAX_DECLARATION_BYTES),
    };
    assert.match(
      rejected(readDeclaration(payload({ extensions: { bazaar: big } }), requirements, publicOnly)),
      /extensions\.bazaar is \d+ bytes; the catalog accepts declarations of at most 16384/,
    );
    assert.match(
      rejected(
        readDeclaration(
          payload({ resource: { description: "d".repeat(MAX_DESCRIPTION_LENGTH + 1) } }),
          requirements,
          publicOnly,
        ),
      ),
      /resource\.description is 1025 characters; the catalog accepts at most 1024/,
    );
    assert.match(
      rejected(
        readDeclaration(payload({ resource: { description: 42 } }), requirements, publicOnly),
      ),
      /resource\.description must be a string/,
    );
    assert.match(
      rejected(
        readDeclaration(
          payload({ resource: { mimeType: "not a type" } }),
          requirements,
          publicOnly,
        ),
      ),
      /mimeType must be a media type/,
    );
    const heavy = { ...requirements, extra: { blob: "b".repeat(4096) } };
    assert.match(
      rejected(readDeclaration(payload({}), heavy, publicOnly)),
      /paymentRequirements is \d+ bytes/,
    );
  });

  test("resource URLs must be public http(s) URLs", () => {
    const cases: [unknown, RegExp][] = [
      [undefined, /resource\.url is required/],
      ["ftp://files.example.com/x", /must be an http or https URL, not ftp/],
      ["javascript:alert(1)", /must be an http or https URL/],
      ["https://user:pw@api.example.com/x", /must not carry a user name or password/],
      ["/relative/path", /not an absolute URL/],
      ["http://localhost:3000/x", /not publicly reachable/],
      ["http://10.1.2.3/x", /not publicly reachable/],
      ["http://[::1]/x", /not publicly reachable/],
      [`https://api.example.com/${"a".repeat(2100)}`, /at most 2048/],
    ];
    for (const [url, reason] of cases) {
      assert.match(
        rejected(readDeclaration(payload({ resource: { url } }), requirements, publicOnly)),
        reason,
        String(url),
      );
    }
    // Devnet mode: resource servers on loopback are fine.
    const local = readDeclaration(
      payload({ resource: { url: "http://127.0.0.1:4021/weather" } }),
      requirements,
      { allowPrivateHosts: true },
    );
    assert.equal(accepted(local).resource, "http://127.0.0.1:4021/weather");
  });

  test("long reasons are cut to fit a header", () => {
    const mismatch = getDeclaration();
    const schema = mismatch["schema"] as {
      properties: { input: { properties: Record<string, unknown> } };
    };
    for (let i = 0; i < 40; i++) {
      schema.properties.input.properties[`p${i}`] = { type: "string" };
      (mismatch["info"] as { input: Record<string, unknown> }).input[`p${i}`] = i;
    }
    const reason = rejected(
      readDeclaration(payload({ extensions: { bazaar: mismatch } }), requirements, publicOnly),
    );
    assert.ok(reason.length <= 300, `${reason.length}`);
    assert.ok(reason.endsWith("…"));
  });
});
