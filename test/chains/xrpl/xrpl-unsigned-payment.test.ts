/**
 * An XRPL transaction that carries no signature of any kind (no
 * TxnSignature, no SigningPubKey, no Signers) is a payer's mistake, not the
 * service's: /verify and /settle answer it with the family's reason for
 * the signing key, no live record is left and nothing moves. Its id cannot be
 * computed (the `xrpl` package refuses to hash an unsigned transaction), and
 * that refusal once escaped the reading of the request at the edge.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { encode, Wallet } from "xrpl";
import { paymentFor } from "../../../src/chains/xrpl/clients/exactClient.js";
import { XrplReason } from "../../../src/chains/xrpl/reasons.js";
import { startStack, type TestStack } from "../../support/stack.js";
import { paymentRequest } from "../../chains/evm/payments.js";
import { post } from "../../support/http.js";
import { xrpRequirements } from "./payments.js";

describe("an XRPL payment with no signature", () => {
  let stack: TestStack;

  before(async () => {
    stack = await startStack({ families: { xrpl: { closeMs: 200 } } });
  });
  after(async () => {
    await stack.stop();
  });

  test("is refused on /verify and /settle with the signing key's reason; no live record, nothing moved", async () => {
    const ledger = stack.families.xrpl!.ledger;
    const wallet = Wallet.fromSeed(stack.families.xrpl!.info.payerSeeds[3]!);
    const payTo = stack.families.xrpl!.info.payTo;
    const requirements = xrpRequirements(stack, "4441");
    const unsigned = encode({
      ...paymentFor(wallet.classicAddress, requirements),
      Fee: "12",
      Sequence: 1,
      LastLedgerSequence: 1_000_000,
    } as never);
    const body = paymentRequest(requirements, { signedTxBlob: unsigned });
    const before = [ledger.xrpBalance(wallet.classicAddress), ledger.xrpBalance(payTo)];

    const verify = await post(stack.url, "/verify", body, stack.apiKey);
    assert.equal(verify.status, 200);
    const verified = (await verify.json()) as { isValid: boolean; invalidReason?: string };
    assert.equal(verified.isValid, false);
    assert.equal(verified.invalidReason, XrplReason.signingKey);

    const settle = await post(stack.url, "/settle", body, stack.apiKey);
    assert.equal(settle.status, 200);
    const settled = (await settle.json()) as { success: boolean; errorReason?: string };
    assert.equal(settled.success, false);
    assert.equal(settled.errorReason, XrplReason.signingKey);

    const rows = await stack.service.db
      .selectFrom("settlements")
      .select(["status"])
      .where("payer", "=", wallet.classicAddress)
      .where("amount", "=", "4441")
      .where("status", "in", ["pending", "succeeded"])
      .execute();
    assert.deepEqual(rows, []);
    assert.deepEqual([ledger.xrpBalance(wallet.classicAddress), ledger.xrpBalance(payTo)], before);
  });
});
