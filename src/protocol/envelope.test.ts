import { test } from "node:test";
import assert from "node:assert/strict";
import { parsePaymentRequestBody } from "./envelope.js";

const requirements = {
  scheme: "exact",
  network: "eip155:8453",
  asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
  amount: "1000",
  payTo: "0x0000000000000000000000000000000000000001",
  maxTimeoutSeconds: 60,
};
const good = {
  x402Version: 2,
  paymentPayload: { x402Version: 2, accepted: requirements, payload: {} },
  paymentRequirements: requirements,
};

test("a well-formed body parses", () => {
  assert.equal(parsePaymentRequestBody(good).kind, "ok");
});

test("another protocol version is a version verdict, not a list of shape errors", () => {
  assert.equal(
    parsePaymentRequestBody({ x402Version: 1, paymentPayload: {}, paymentRequirements: {} }).kind,
    "wrong_version",
  );
  assert.equal(
    parsePaymentRequestBody({ ...good, paymentPayload: { x402Version: 1 } }).kind,
    "wrong_version",
  );
});

test("shape errors name the field", () => {
  const r = parsePaymentRequestBody({
    ...good,
    paymentRequirements: { ...requirements, amount: "1.5e6" },
  });
  assert.equal(r.kind, "invalid");
  assert.match(
    (r as { message: string }).message,
    /^paymentRequirements\.amount must be a string of digits/,
  );
  const xrplRequirements = { ...requirements, network: "xrpl:0", amount: "0.25" };
  const xrpl = parsePaymentRequestBody({
    ...good,
    paymentPayload: { ...good.paymentPayload, accepted: xrplRequirements },
    paymentRequirements: xrplRequirements,
  });
  assert.equal(xrpl.kind, "ok", "a decimal value passes the envelope (the family decides)");
  const big = parsePaymentRequestBody({
    ...good,
    paymentRequirements: { ...requirements, amount: "9".repeat(78) },
  });
  assert.match((big as { message: string }).message, /uint256/);
  const missing = parsePaymentRequestBody({ x402Version: 2 });
  assert.match((missing as { message: string }).message, /paymentPayload is required/);
});
