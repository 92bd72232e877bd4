/**
 * The HTTP contract: auth, the error envelope, and bad input. Every bad
 * request gets a 4xx JSON body with a stable `error` code and a `message`,
 * never a 500 and never a stack trace, and changes nothing.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startStack, type TestStack } from "../support/stack.js";
import { requirementsFor, signPayment } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { createApiKey, deleteApiKey } from "../../src/features/keys/apiKeys.js";

interface ErrorBody {
  error: string;
  message: string;
  requestId: string;
}

describe("HTTP API", () => {
  let stack: TestStack;
  let goodBody: Record<string, unknown>;

  before(async () => {
    stack = await startStack();
    const requirements = requirementsFor({
      network: stack.network,
      usdc: stack.usdc,
      payTo: "0x4444444444444444444444444444444444444444",
    });
    goodBody = {
      x402Version: 2,
      paymentPayload: await signPayment(stack.payerKeys[0]!, requirements),
      paymentRequirements: requirements,
    };
  });
  after(() => stack.stop());

  async function expectError(res: Response, status: number, code: string): Promise<ErrorBody> {
    assert.equal(res.status, status);
    assert.match(res.headers.get("content-type") ?? "", /application\/json/);
    const body = (await res.json()) as ErrorBody;
    assert.equal(body.error, code);
    assert.equal(typeof body.message, "string");
    assert.ok(body.message.length > 10, "message says what was wrong");
    assert.match(body.requestId, /^req_/);
    assert.doesNotMatch(JSON.stringify(body), /at .*\.(ts|js):\d+/, "no stack trace");
    return body;
  }

  const settlementCount = async () =>
    Number(
      (
        await stack.service.db
          .selectFrom("settlements")
          .select((e) => e.fn.countAll().as("n"))
          .executeTakeFirstOrThrow()
      ).n,
    );

  for (const path of ["/verify", "/settle"]) {
    test(`${path}: 401 without a key, with a wrong key, and with a deleted key`, async () => {
      await expectError(await post(stack.url, path, goodBody), 401, "unauthorized");
      await expectError(
        await post(stack.url, path, goodBody, "x402_sk_" + "A".repeat(43)),
        401,
        "unauthorized",
      );
      await expectError(
        await post(stack.url, path, goodBody, "not-even-a-key"),
        401,
        "unauthorized",
      );
      const doomed = await createApiKey(stack.service.db, stack.accountId, "doomed");
      await deleteApiKey(stack.service.db, doomed.id);
      stack.service.auth.invalidate();
      await expectError(await post(stack.url, path, goodBody, doomed.key), 401, "unauthorized");
      assert.equal(await settlementCount(), 0);
    });

    test(`${path}: malformed JSON, wrong content type and an over-size body`, async () => {
      await expectError(
        await post(stack.url, path, "{not json", stack.apiKey),
        400,
        "invalid_json",
      );
      await expectError(await post(stack.url, path, "", stack.apiKey), 400, "invalid_json");
      await expectError(
        await post(stack.url, path, JSON.stringify(goodBody), stack.apiKey, {
          "content-type": "text/plain",
        }),
        415,
        "unsupported_media_type",
      );
      await expectError(
        await post(stack.url, path, "x=1", stack.apiKey, {
          "content-type": "application/x-www-form-urlencoded",
        }),
        415,
        "unsupported_media_type",
      );
      const huge = { ...goodBody, padding: "x".repeat(70 * 1024) };
      await expectError(await post(stack.url, path, huge, stack.apiKey), 413, "payload_too_large");
      assert.equal(await settlementCount(), 0);
    });

    test(`${path}: missing fields and wrong types name the field`, async () => {
      const cases: [unknown, RegExp][] = [
        [[], /JSON object/],
        [
          { x402Version: 2, paymentRequirements: goodBody["paymentRequirements"] },
          /paymentPayload is required/,
        ],
        [{ ...goodBody, paymentRequirements: undefined }, /paymentRequirements is required/],
        [{ ...goodBody, x402Version: "2" }, /x402Version must be a number/],
        [
          {
            ...goodBody,
            paymentRequirements: { ...(goodBody["paymentRequirements"] as object), amount: 10000 },
          },
          /paymentRequirements\.amount must be a string/,
        ],
        [
          {
            ...goodBody,
            paymentRequirements: { ...(goodBody["paymentRequirements"] as object), amount: "-5" },
          },
          /paymentRequirements\.amount must be a string of digits/,
        ],
        [
          // A decimal value is an issued currency's amount: not on an EVM network.
          {
            ...goodBody,
            paymentRequirements: { ...(goodBody["paymentRequirements"] as object), amount: "1.5" },
          },
          /paymentRequirements\.amount must be a string of digits/,
        ],
        [
          {
            ...goodBody,
            paymentRequirements: {
              ...(goodBody["paymentRequirements"] as object),
              network: "base",
            },
          },
          /CAIP-2/,
        ],
        [
          {
            ...goodBody,
            paymentPayload: {
              ...(goodBody["paymentPayload"] as object),
              payload: { signature: "0x12", authorization: { from: "nope" } },
            },
          },
          /paymentPayload\.payload\.authorization\.from/,
        ],
        [
          {
            ...goodBody,
            paymentPayload: { ...(goodBody["paymentPayload"] as object), payload: {} },
          },
          /authorization/,
        ],
      ];
      for (const [body, message] of cases) {
        const err = await expectError(
          await post(stack.url, path, body, stack.apiKey),
          400,
          "invalid_request",
        );
        assert.match(err.message, message);
      }
      assert.equal(await settlementCount(), 0);
    });
  }

  test("unknown routes get a JSON 404", async () => {
    await expectError(await fetch(`${stack.url}/nope`), 404, "not_found");
  });

  test("GET /supported needs no key and lists every EVM scheme on the devnet network", async () => {
    const res = await fetch(`${stack.url}/supported`);
    assert.equal(res.status, 200);
    const body = (await res.json()) as {
      kinds: { scheme: string; network: string; x402Version: number }[];
    };
    assert.deepEqual(
      body.kinds.map((k) => `${k.x402Version} ${k.scheme} ${k.network}`).sort(),
      ["batch-settlement", "exact", "upto"].map((s) => `2 ${s} ${stack.network}`),
    );
  });
});
