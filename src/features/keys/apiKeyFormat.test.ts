import { test } from "node:test";
import assert from "node:assert/strict";
import {
  generateApiKey,
  hashApiKey,
  looksLikeApiKey,
  maskedPrefix,
  sameHash,
} from "./apiKeyFormat.js";

test("keys are random, well-formed and masked to a short prefix", () => {
  const a = generateApiKey();
  const b = generateApiKey();
  assert.notEqual(a, b);
  assert.ok(looksLikeApiKey(a));
  assert.equal(maskedPrefix(a), a.slice(0, 12) + "…");
  assert.ok(!maskedPrefix(a).includes(a.slice(12)));
  assert.ok(!looksLikeApiKey("x402_sk_short"));
  assert.ok(!looksLikeApiKey(a + "x"));
});

test("hash comparison is by value", () => {
  const k = generateApiKey();
  assert.ok(sameHash(hashApiKey(k), hashApiKey(k)));
  assert.ok(!sameHash(hashApiKey(k), hashApiKey(generateApiKey())));
  assert.ok(!sameHash(hashApiKey(k), new Uint8Array(3)));
});
