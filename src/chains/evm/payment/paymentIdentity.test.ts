import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { evmAuthorizationKey, evmPayerOf, evmQuotaUnits } from "./paymentIdentity.js";

const USDC = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";
const PAYER = "0x1111111111111111111111111111111111111111";
const OTHER = "0x2222222222222222222222222222222222222222";

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

  test("a junk `authorization` beside a permit does not make a new key", () => {
    const permit = { from: PAYER, nonce: "42" };
    const plain = evmAuthorizationKey(payload({ permit2Authorization: permit }), requirements());
    const junk = evmAuthorizationKey(
      payload({ permit2Authorization: permit, authorization: { from: OTHER, nonce: "0x01" } }),
      requirements(),
    );
    assert.equal(junk, plain);
  });

  test("the payer comes from the branch the mechanism executes", () => {
    assert.equal(evmPayerOf(eip3009("0x00"), requirements()), PAYER);
    assert.equal(
      evmPayerOf(payload({ permit2Authorization: { from: PAYER } }), requirements()),
      PAYER,
    );
    // Both forms: the mechanism settles the permit, so its owner pays (the
    // shape check refuses such a payload before this is ever read).
    assert.equal(
      evmPayerOf(
        payload({ authorization: { from: OTHER }, permit2Authorization: { from: PAYER } }),
        requirements(),
      ),
      PAYER,
    );
    assert.equal(evmPayerOf(payload({}), requirements()), undefined);
  });

  test("a batch operation has a payer only when it moves the payer's tokens (a deposit)", () => {
    const batch = requirements("batch-settlement");
    const config = { payer: PAYER };
    assert.equal(evmPayerOf(payload({ type: "deposit", channelConfig: config }), batch), PAYER);
    for (const type of ["settle", "claim", "refund", "voucher"]) {
      // An `authorization.from` beside them names nobody: no mechanism reads it.
      const named = payload({ type, channelConfig: config, authorization: { from: OTHER } });
      assert.equal(evmPayerOf(named, batch), undefined, type);
    }
  });
});

describe("batch-settlement keys follow the on-chain authorization", () => {
  const batch = requirements("batch-settlement");
  const channelId = `0x${"cc".repeat(32)}`;
  const salt = (n: string) => `0x${n.repeat(32)}`;
  const deposit = (s: string, extra: Record<string, unknown> = {}) =>
    payload({
      type: "deposit",
      channelConfig: { payer: PAYER },
      voucher: { channelId, maxClaimableAmount: "5" },
      deposit: { amount: "5", authorization: { erc3009Authorization: { salt: s } } },
      ...extra,
    });

  test("a deposit is its channel and salt; unsigned fields around it do not change the key", () => {
    const a = evmAuthorizationKey(deposit(salt("01")), batch);
    assert.ok(a?.includes(":batch-deposit:"));
    assert.equal(a, evmAuthorizationKey(deposit(salt("01"), { junk: "x" }), batch));
    assert.notEqual(a, evmAuthorizationKey(deposit(salt("02")), batch));
  });

  test("a Permit2 deposit shares the Permit2 key space of exact and upto", () => {
    const permit = { from: PAYER, nonce: "9" };
    const body = payload({
      type: "deposit",
      voucher: { channelId },
      deposit: { authorization: { permit2Authorization: permit } },
    });
    assert.equal(
      evmAuthorizationKey(body, batch),
      evmAuthorizationKey(payload({ permit2Authorization: permit }), requirements("exact")),
    );
  });

  test("a refund is its channel and refund nonce", () => {
    const refund = (n: string) =>
      payload({ type: "refund", voucher: { channelId }, refundNonce: n, amount: "1" });
    assert.equal(evmAuthorizationKey(refund("1"), batch), evmAuthorizationKey(refund("01"), batch));
    assert.notEqual(
      evmAuthorizationKey(refund("1"), batch),
      evmAuthorizationKey(refund("2"), batch),
    );
  });

  test("a claim is its channels and totals, in any order", () => {
    const config = (p: string) => ({
      payer: p,
      payerAuthorizer: p,
      receiver: OTHER,
      receiverAuthorizer: OTHER,
      token: USDC,
      withdrawDelay: 900,
      salt: salt("00"),
    });
    const claim = (p: string, total: string) => ({
      voucher: { channel: config(p), maxClaimableAmount: "10" },
      signature: "0x01",
      totalClaimed: total,
    });
    const one = claim(PAYER, "3");
    const two = claim(OTHER, "4");
    const key = (claims: unknown[]) =>
      evmAuthorizationKey(payload({ type: "claim", claims }), batch);
    assert.ok(key([one, two])?.includes(":batch-claim:"));
    assert.equal(key([one, two]), key([two, one]));
    assert.notEqual(key([one, two]), key([one, claim(OTHER, "5")]));
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
