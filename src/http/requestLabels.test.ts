import { test } from "node:test";
import assert from "node:assert/strict";
import { OTHER_LABEL, RequestLabels } from "./requestLabels.js";

test("network labels: served networks as they are, anything else other", () => {
  const labels = new RequestLabels(["eip155:8453", "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"]);
  assert.equal(labels.network("eip155:8453"), "eip155:8453");
  assert.equal(labels.network("eip155:84532"), OTHER_LABEL);
  assert.equal(labels.network("zzz:bogus1"), OTHER_LABEL);
  assert.equal(labels.network(undefined), OTHER_LABEL);
  assert.equal(labels.network(42), OTHER_LABEL);
});

test("reason labels: known outcomes and reasons, mechanism-shaped reasons up to a cap, else other", () => {
  const labels = new RequestLabels([], 3);
  for (const known of ["valid", "succeeded", "invalid_network", "duplicate_settlement"]) {
    assert.equal(labels.reason(known), known);
  }
  for (const free of [
    "Transaction simulation failed: custom program error 0x1",
    "invalid exact svm payload",
    "INVALID_EXACT_EVM_SIGNATURE",
    "made_up_reason",
    `invalid_${"x".repeat(100)}`,
  ]) {
    assert.equal(labels.reason(free), OTHER_LABEL, free);
  }
  assert.equal(labels.reason("invalid_exact_evm_signature"), "invalid_exact_evm_signature");
  assert.equal(labels.reason("permit2_invalid_nonce"), "permit2_invalid_nonce");
  assert.equal(
    labels.reason("invalid_upto_svm_payload_expired"),
    "invalid_upto_svm_payload_expired",
  );
  // The cap (3 here) is reached: a new one is other, the admitted ones stay.
  assert.equal(labels.reason("invalid_exact_xrpl_amount"), OTHER_LABEL);
  assert.equal(labels.reason("permit2_invalid_nonce"), "permit2_invalid_nonce");
  assert.equal(labels.reason("invalid_network"), "invalid_network", "known reasons never capped");
});
