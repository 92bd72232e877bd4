import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { evmAuthorizationKey, evmPayerOf, evmQuotaUnits } from "./paymentIdentity.js";

const USDC = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";
const PAYER = "0x1111111111111111111111111111111111111111";

function requirements(scheme = "exact"): PaymentRequirements {
  return { scheme, network: "eip155:8453", asset: USDC } as unknown as PaymentRequirements;
}
function payload(body: Record<string, unknown>): PaymentPayload {
  return { x402Version: 2, payload: body } as unknown as PaymentPayload;
}
const eip3009 = (nonce: string, from = PAYER) =>
  payload({ signature: "0x01", authorization: { from, nonce } });

describe("EVM authorization keys", () => {
  test("copies of one EIP-3009 authorization share a key, whatever the case of the hex", () => {
    const a = evmAuthorizationKey(eip3009(`0x${"ab".repeat(32)}`), requirements());
    const b = evmAuthorizationKey(
      eip3009(`0x${"AB".repeat(32)}`, PAYER.toUpperCase().replace("0X", "0x")),
      requirements(),
    );
    assert.ok(a);
    assert.equal(a, b);
  });

  test("another nonce, payer or token is another authorization", () => {
    const base = evmAuthorizationKey(eip3009(`0x${"ab".repeat(32)}`), requirements());
    assert.notEqual(base, evmAuthorizationKey(eip3009(`0x${"cd".repeat(32)}`), requirements()));
    assert.notEqual(
      base,
      evmAuthorizationKey(eip3009(`0x${"ab".repeat(32)}`, `0x${"22".repeat(20)}`), requirements()),
    );
    assert.notEqual(
      base,
      evmAuthorizationKey(eip3009(`0x${"ab".repeat(32)}`), {
        ...requirements(),
        asset: `0x${"33".repeat(20)}`,
      }),
    );
  });

  test("Permit2 authorizations are keyed by owner and nonce, across schemes", () => {
    const body = { signature: "0x01", permit2Authorization: { from: PAYER, nonce: "42" } };
    const exact = evmAuthorizationKey(payload(body), requirements("exact"));
    const upto = evmAuthorizationKey(payload(body), requirements("upto"));
    assert.ok(exact?.includes(":permit2:"));
    assert.equal(exact, upto);
  });

  test("a Permit2 nonce is one number however it is written", () => {
    const key = (nonce: string) =>
      evmAuthorizationKey(
        payload({ signature: "0x01", permit2Authorization: { from: PAYER, nonce } }),
        requirements("exact"),
      );
    assert.equal(key("01"), key("1"));
    assert.equal(key("0007"), key("7"));
    assert.notEqual(key("1"), key("10"));
  });

  test("a payload with neither names no key (the service hashes the payload instead)", () => {
    assert.equal(evmAuthorizationKey(payload({ type: "claim" }), requirements()), undefined);
  });

  test("the payer comes from either authorization", () => {
    assert.equal(evmPayerOf(eip3009("0x00")), PAYER);
    assert.equal(evmPayerOf(payload({ permit2Authorization: { from: PAYER } })), PAYER);
    assert.equal(evmPayerOf(payload({})), undefined);
  });
});

describe("EVM quota units (spec section 8)", () => {
  test("an exact or upto settlement is one unit", () => {
    assert.equal(evmQuotaUnits(eip3009("0x00"), requirements()), 1);
    assert.equal(evmQuotaUnits(eip3009("0x00"), requirements("upto")), 1);
  });

  test("a batch-settlement claim counts one unit per voucher", () => {
    const claims = [{ v: 1 }, { v: 2 }, { v: 3 }];
    assert.equal(
      evmQuotaUnits(payload({ type: "claim", claims }), requirements("batch-settlement")),
      3,
    );
    assert.equal(
      evmQuotaUnits(payload({ type: "claim", claims: [] }), requirements("batch-settlement")),
      0,
    );
  });

  test("batch-settlement deposit, settle and a refund with no claims count zero", () => {
    for (const type of ["deposit", "settle", "refund"]) {
      assert.equal(evmQuotaUnits(payload({ type }), requirements("batch-settlement")), 0, type);
    }
  });

  test("a refund counts the vouchers its claims settle: they are claims like any other", () => {
    const claims = [{ v: 1 }, { v: 2 }];
    assert.equal(
      evmQuotaUnits(payload({ type: "refund", claims }), requirements("batch-settlement")),
      2,
    );
  });
});
