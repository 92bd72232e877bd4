/**
 * The XRP Ledger's validation as an operator meets it: a payment not
 * validated within the time budget is `settlement_pending` with its hash,
 * and a retry of the same payment later learns the truth from the ledger
 * (one record, one payment); a node without the history to prove a payment
 * missing never turns it into a failure. (The node down and a lost answer
 * to the submit: test/families/outage.test.ts.)
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { PaymentRequirements } from "@x402/core/types";
import { Client, Wallet } from "xrpl";
import { paymentFor } from "../../../src/chains/xrpl/clients/exactClient.js";
import { startStack, type TestStack } from "../../support/stack.js";
import { paymentRequest } from "../../chains/evm/payments.js";
import { post } from "../../support/http.js";
import { xrpRequirements } from "./payments.js";
import { until } from "../../support/processes.js";

describe("XRP Ledger slow validation", () => {
  let stack: TestStack;
  let ws: Client;

  before(async () => {
    stack = await startStack({
      families: { xrpl: { closeMs: 200 } },
      env: { SETTLE_TIMEOUT_MS: "1500" },
    });
    ws = new Client(stack.families.xrpl!.info.wsUrl);
    await ws.connect();
  });
  after(async () => {
    await ws?.disconnect();
    await stack.stop();
  });

  const ledger = () => stack.families.xrpl!.ledger;
  /** Payer `i`'s payment, valid for `ledgersAhead` ledgers past the validated one. */
  const signed = async (i: number, req: PaymentRequirements, ledgersAhead = 60) => {
    const wallet = Wallet.fromSeed(stack.families.xrpl!.info.payerSeeds[i]!);
    const tx = await ws.autofill({
      ...paymentFor(wallet.classicAddress, req),
      LastLedgerSequence: (await ws.getLedgerIndex()) + ledgersAhead,
    });
    return { wallet, body: paymentRequest(req, { signedTxBlob: wallet.sign(tx).tx_blob }) };
  };
  const rowsOf = (payer: string, amount: string) =>
    stack.service.db
      .selectFrom("settlements")
      .select(["status", "attempts", "transaction"])
      .where("payer", "=", payer)
      .where("amount", "=", amount)
      .execute();

  test("a node without the history to prove a payment missing: pending, never a failure", async () => {
    // A short LastLedgerSequence that passes well within the time budget.
    const { wallet, body: short } = await signed(2, xrpRequirements(stack, "3333"), 2);
    const before = ledger().xrpBalance(wallet.classicAddress);
    ledger().withhold = true;
    ledger().retainLedgers = 1;
    let out: { success: boolean; errorReason?: string; transaction: string };
    try {
      out = (await (await post(stack.url, "/settle", short, stack.apiKey)).json()) as typeof out;
    } finally {
      ledger().retainLedgers = 10_000;
      ledger().release();
    }
    assert.equal(out.success, false);
    assert.equal(out.errorReason, "settlement_pending");
    assert.equal(ledger().xrpBalance(wallet.classicAddress), before);
    assert.deepEqual(
      (await rowsOf(wallet.classicAddress, "3333")).map((r) => r.status),
      ["pending"],
    );
  });

  test("not validated in time: settlement_pending with the hash; a retry once it lands answers success, one payment", async () => {
    const { wallet, body } = await signed(1, xrpRequirements(stack, "2222"));
    const before = ledger().xrpBalance(wallet.classicAddress);
    ledger().withhold = true;
    let first: { success: boolean; errorReason?: string; transaction: string };
    try {
      first = (await (await post(stack.url, "/settle", body, stack.apiKey)).json()) as typeof first;
    } finally {
      ledger().release();
    }
    assert.equal(first.success, false);
    assert.equal(first.errorReason, "settlement_pending");
    assert.match(first.transaction, /^[0-9A-F]{64}$/);
    assert.deepEqual(
      (await rowsOf(wallet.classicAddress, "2222")).map((r) => r.status),
      ["pending"],
    );
    await until("the held payment is validated", async () =>
      ledger().transaction(first.transaction)?.ledgerIndex !== undefined ? true : undefined,
    );
    const retry = (await (await post(stack.url, "/settle", body, stack.apiKey)).json()) as {
      success: boolean;
      transaction: string;
    };
    assert.deepEqual([retry.success, retry.transaction], [true, first.transaction]);
    const fee = BigInt(String(ledger().transaction(first.transaction)!.tx["Fee"]));
    assert.equal(ledger().xrpBalance(wallet.classicAddress), before - 2222n - fee);
    const rows = await rowsOf(wallet.classicAddress, "2222");
    assert.deepEqual(
      rows.map((r) => [r.status, r.attempts, r.transaction]),
      [["succeeded", 2, first.transaction]],
    );
  });
});
