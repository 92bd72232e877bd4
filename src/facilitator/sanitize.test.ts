import { test } from "node:test";
import assert from "node:assert/strict";
import { sanitizeMessage } from "./sanitize.js";

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
