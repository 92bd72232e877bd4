/**
 * The Permit2 nonce's shape: one spelling per number, so "01" (the same
 * on-chain nonce as "1") is refused as malformed instead of settled twice.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { evmExactPayloadShapeError, evmUptoPayloadShapeError } from "./payloadShape.js";

const A = `0x${"11".repeat(20)}`;
const body = (nonce: string) => ({
  signature: "0x0102",
  permit2Authorization: {
    from: A,
    permitted: { token: A, amount: "1000" },
    spender: A,
    nonce,
    deadline: "9999999999",
    witness: { to: A, facilitator: A, validAfter: "0" },
  },
});

test("a Permit2 nonce with leading zeros is refused; its canonical spelling is taken", () => {
  for (const check of [evmExactPayloadShapeError, evmUptoPayloadShapeError]) {
    assert.equal(check(body("1")), undefined);
    assert.equal(check(body("0")), undefined);
    assert.match(check(body("01")) ?? "", /nonce.*leading zeros/);
    assert.match(check(body("000")) ?? "", /leading zeros/);
  }
});
