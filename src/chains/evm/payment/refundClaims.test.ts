import { test } from "node:test";
import assert from "node:assert/strict";
import { foreignRefundClaim } from "./refundClaims.js";

const channel = (salt: string) => ({
  payer: "0x1111111111111111111111111111111111111111",
  payerAuthorizer: "0x1111111111111111111111111111111111111111",
  receiver: "0x2222222222222222222222222222222222222222",
  receiverAuthorizer: "0x3333333333333333333333333333333333333333",
  token: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
  withdrawDelay: 900,
  salt: salt.padEnd(66, "0"),
});

test("a refund's own claims ride along; a claim of another channel is refused by name", () => {
  const own = channel("0x01");
  const other = channel("0x02");
  const refund = (claims: unknown[]) => ({ type: "refund", channelConfig: own, claims });
  assert.equal(
    foreignRefundClaim(refund([{ voucher: { channel: own } }]), "eip155:8453"),
    undefined,
  );
  assert.match(
    foreignRefundClaim(
      refund([{ voucher: { channel: own } }, { voucher: { channel: other } }]),
      "eip155:8453",
    ) ?? "",
    /claims\[1\] is a voucher of another channel/,
  );
  assert.equal(foreignRefundClaim({ type: "claim", claims: [{}] }, "eip155:8453"), undefined);
});
