import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { MAX_BODY_DEPTH, findBodyProblem } from "./bodyGuard.js";

function nested(depth: number): unknown {
  let v: unknown = "leaf";
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

describe("the body guard", () => {
  test("an ordinary x402 body passes", () => {
    const body = {
      x402Version: 2,
      paymentPayload: {
        payload: { authorization: { from: "0xabc" } },
        extensions: { bazaar: { info: { input: [1, 2, "💸"] } } },
      },
    };
    assert.equal(findBodyProblem(body), undefined);
  });

  test("a NUL character is named with its path", () => {
    const p = findBodyProblem({ paymentPayload: { resource: { description: "a\u0000b" } } });
    assert.equal(p?.path, "paymentPayload.resource.description");
    assert.match(p!.message, /NUL/);
  });

  test("lone surrogates, high or low, are refused; a real pair passes", () => {
    assert.match(findBodyProblem({ x: "\ud800" })!.message, /surrogate/);
    assert.match(findBodyProblem({ x: ["ok", "\udc00z"] })!.message, /surrogate/);
    assert.equal(findBodyProblem({ x: "\ud83d\udcb8" }), undefined);
  });

  test("a field name is checked too", () => {
    const p = findBodyProblem({ paymentPayload: { extensions: { "k\u0000": 1 } } });
    assert.equal(p?.path, "paymentPayload.extensions");
    assert.match(p!.message, /field name/);
  });

  test("nesting is bounded, and 12,000 levels are walked without overflowing the stack", () => {
    assert.equal(findBodyProblem(nested(MAX_BODY_DEPTH - 1)), undefined);
    assert.match(findBodyProblem(nested(MAX_BODY_DEPTH + 1))!.message, /deeper than/);
    assert.match(findBodyProblem(nested(12_000))!.message, /deeper than/);
  });
});
