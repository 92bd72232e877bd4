/**
 * EVM payload shapes. The Permit2 nonce has one spelling per number, so "01" (the same
 * on-chain nonce as "1") is refused as malformed instead of settled twice.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  evmBatchPayloadShapeError,
  evmExactPayloadShapeError,
  evmUptoPayloadShapeError,
} from "./payloadShape.js";

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

const eip3009Body = {
  signature: "0x0102",
  authorization: {
    from: A,
    to: A,
    value: "1",
    validAfter: "0",
    validBefore: "9999999999",
    nonce: `0x${"ab".repeat(32)}`,
  },
};

test("a payload with both authorization forms is refused, whichever the scheme", () => {
  const both = { ...body("1"), authorization: eip3009Body.authorization };
  assert.match(evmExactPayloadShapeError(both) ?? "", /one authorization form.*not both/);
  assert.match(evmUptoPayloadShapeError(both) ?? "", /not both/);
});

test("an unknown top-level field is refused, by name", () => {
  assert.equal(evmExactPayloadShapeError(eip3009Body), undefined);
  assert.match(
    evmExactPayloadShapeError({ ...eip3009Body, payer: A }) ?? "",
    /paymentPayload\.payload\.payer is not a field/,
  );
  assert.match(
    evmUptoPayloadShapeError({ ...body("1"), extra: 1 }) ?? "",
    /\.extra is not a field/,
  );
});

describe("batch-settlement payloads", () => {
  const B32 = `0x${"cd".repeat(32)}`;
  const channelConfig = {
    payer: A,
    payerAuthorizer: A,
    receiver: A,
    receiverAuthorizer: A,
    token: A,
    withdrawDelay: 900,
    salt: B32,
  };
  const voucher = { channelId: B32, maxClaimableAmount: "10", signature: "0x01" };
  const deposit = {
    type: "deposit",
    channelConfig,
    voucher,
    deposit: {
      amount: "10",
      authorization: {
        erc3009Authorization: { validAfter: "0", validBefore: "99", salt: B32, signature: "0x01" },
      },
    },
  };

  test("each operation's own shape passes", () => {
    assert.equal(evmBatchPayloadShapeError(deposit), undefined);
    assert.equal(evmBatchPayloadShapeError({ type: "settle", receiver: A, token: A }), undefined);
    assert.equal(evmBatchPayloadShapeError({ type: "voucher", channelConfig, voucher }), undefined);
    assert.equal(
      evmBatchPayloadShapeError({
        type: "claim",
        claims: [
          {
            voucher: { channel: channelConfig, maxClaimableAmount: "10" },
            signature: "0x01",
            totalClaimed: "3",
          },
        ],
      }),
      undefined,
    );
  });

  test("a settle carrying an `authorization` (a payer nobody verifies) is refused", () => {
    const injected = {
      type: "settle",
      receiver: A,
      token: A,
      authorization: { from: `0x${"99".repeat(20)}` },
    };
    assert.match(evmBatchPayloadShapeError(injected) ?? "", /authorization is not a field/);
  });

  test("an unknown type, or a deposit with both authorization forms, is refused", () => {
    assert.match(evmBatchPayloadShapeError({ type: "steal" }) ?? "", /type must be one of/);
    const both = {
      ...deposit,
      deposit: {
        amount: "10",
        authorization: {
          ...deposit.deposit.authorization,
          permit2Authorization: { from: A },
        },
      },
    };
    assert.ok(evmBatchPayloadShapeError(both));
  });

  test("a Permit2 deposit must be signed by the channel's payer", () => {
    const permit = {
      from: `0x${"77".repeat(20)}`,
      permitted: { token: A, amount: "10" },
      spender: A,
      nonce: "1",
      deadline: "99",
      witness: { channelId: B32 },
      signature: "0x01",
    };
    const body = {
      ...deposit,
      deposit: { amount: "10", authorization: { permit2Authorization: permit } },
    };
    assert.match(
      evmBatchPayloadShapeError(body) ?? "",
      /must be paymentPayload\.payload\.channelConfig\.payer/,
    );
    const own = {
      ...body,
      deposit: { amount: "10", authorization: { permit2Authorization: { ...permit, from: A } } },
    };
    assert.equal(evmBatchPayloadShapeError(own), undefined);
  });
});
