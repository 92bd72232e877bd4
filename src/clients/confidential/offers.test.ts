import { test } from "node:test";
import assert from "node:assert/strict";
import { offersFor, type ConfidentialStatus } from "./offers.js";

const status: ConfidentialStatus = {
  available: true,
  network: "eip155:8453",
  contractAddress: "0x00000000000000000000000000000000c0ffee01",
  configured: true,
  mode: "both",
  enabled: true,
  merchantAddress: "0x1111111111111111111111111111111111111111",
};
const plain = {
  scheme: "exact",
  network: "eip155:8453" as const,
  payTo: "0x2222222222222222222222222222222222222222",
  price: "$0.01",
};

test("both mode lists the confidential offer first, then the plain one", () => {
  const offers = offersFor(status, plain);
  assert.equal(offers.length, 2);
  assert.equal(offers[0]!.payTo, status.contractAddress);
  assert.deepEqual(offers[0]!.extra, {
    confidential: true,
    merchant: status.merchantAddress,
    assetTransferMethod: "eip3009",
  });
  assert.equal(offers[0]!.price, "$0.01", "the payer pays the advertised price");
  assert.deepEqual(offers[1], plain);
});

test("confidential mode offers only the private variant; default only the plain one", () => {
  assert.deepEqual(
    offersFor({ ...status, mode: "confidential" }, plain).map((o) => o.payTo),
    [status.contractAddress],
  );
  assert.deepEqual(offersFor({ ...status, mode: "default" }, plain), [plain]);
});

test("until enabled, or where unavailable, only the plain offer is made", () => {
  assert.deepEqual(offersFor({ ...status, enabled: false }, plain), [plain]);
  assert.deepEqual(offersFor({ ...status, available: false }, plain), [plain]);
});
