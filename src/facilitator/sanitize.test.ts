import { test } from "node:test";
import assert from "node:assert/strict";
import { sanitizeMessage, splitReason } from "./sanitize.js";

test("RPC URLs (which may embed provider keys) and detail lines are removed", () => {
  const raw =
    "HTTP request failed.\n\nURL: https://base-mainnet.g.alchemy.com/v2/SECRETKEY\nRequest body: {...}";
  assert.equal(sanitizeMessage(raw), "HTTP request failed.");
  assert.equal(
    sanitizeMessage("call to https://rpc.example/key123 reverted"),
    "call to [url] reverted",
  );
  assert.equal(sanitizeMessage(undefined), undefined);
  assert.equal(sanitizeMessage("x".repeat(1000))!.length, 300);
});

test("a reason carrying its error's text keeps only the code; the text is detail for the message", () => {
  const leaked =
    "invalid_exact_evm_transaction_failed: HTTP request failed. URL: https://base-mainnet.g.alchemy.com/v2/SECRETKEY";
  const split = splitReason(leaked);
  assert.equal(split.code, "invalid_exact_evm_transaction_failed");
  assert.equal(sanitizeMessage(split.detail), "HTTP request failed. URL: [url]");
  assert.doesNotMatch(JSON.stringify({ code: split.code }), /SECRETKEY/);
  assert.deepEqual(splitReason("settlement_pending"), { code: "settlement_pending" });
  assert.deepEqual(splitReason("nonce_already_used:"), { code: "nonce_already_used" });
});
