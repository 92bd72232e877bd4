/**
 * The settle report's decision table, row by row: what a mechanism's
 * answer (or throw) and the transaction layer's notes come to. Outages
 * throw (the service answers 503); a payment that may still land is
 * pending; "nothing was charged" only when nothing was sent.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { SettleResponse } from "@x402/core/types";
import {
  ChainUnavailableError,
  FailedFeeBudgetSpentError,
  NothingSentError,
  type ChainFamily,
} from "../chains/ports.js";
import type { SettlementNotes } from "../chains/settlementScope.js";
import { createLogger } from "../lib/logger.js";
import { isServiceError } from "../lib/errors.js";
import { answerResult, answerThrown, type ReportContext } from "./settleReport.js";

const network = "eip155:8453";

function context(rpcFailing = false): ReportContext {
  const family = {
    rpcFailedSince: () => rpcFailing,
    publicReason: (reason: string) => reason,
  } as unknown as ChainFamily;
  return { network, payer: "0xpayer", family, startedAt: 0, log: createLogger("silent") };
}

const failed: SettleResponse = {
  success: false,
  errorReason: "invalid_exact_evm_payload_signature",
  errorMessage: "bad signature",
  transaction: "",
  network,
};

const notes = (n: Partial<SettlementNotes> = {}): SettlementNotes => ({ sent: false, ...n });

describe("a mechanism that threw", () => {
  test("with its journal entry unwritten and nothing sent: nothing was sent (503)", () => {
    const thrown = { error: new Error("db"), notes: notes({ journalFailed: true }) };
    assert.throws(() => answerThrown(thrown, context()), NothingSentError);
  });

  test("its record made final while it ran and its send refused: that record's interruption, not an outage", () => {
    const thrown = { error: new Error("decided"), notes: notes({ decidedWhileRunning: true }) };
    const r = answerThrown(thrown, context());
    assert.deepEqual(
      [r.success, r.errorReason, r.transaction, r.payer],
      [false, "settlement_interrupted", "", "0xpayer"],
    );
  });

  test("a chain that could not be asked, nothing sent: the outage itself", () => {
    const error = new ChainUnavailableError(network, "down");
    assert.throws(
      () => answerThrown({ error, notes: notes() }, context()),
      (e) => e === error,
    );
  });

  test("the node's answer lost: pending with the transaction followed", () => {
    const r = answerThrown(
      { error: new Error("x"), notes: notes({ sent: true, ambiguousReference: "0xabc" }) },
      context(),
    );
    assert.equal(r.errorReason, "settlement_pending");
    assert.equal(r.transaction, "0xabc");
  });

  test("something sent, or the database failing under it: the outcome is not known (503)", () => {
    const unknown = (e: unknown) => isServiceError(e) && e.code === "service_unavailable";
    assert.throws(
      () => answerThrown({ error: new Error("x"), notes: notes({ sent: true }) }, context()),
      unknown,
    );
    const dbDown = Object.assign(new Error("gone"), { code: "57P01" });
    assert.throws(() => answerThrown({ error: dbDown, notes: notes() }, context()), unknown);
  });

  test("nothing sent: refused, nothing charged; while the RPC failed, an outage", () => {
    const r = answerThrown({ error: new Error("x"), notes: notes() }, context());
    assert.equal(r.success, false);
    assert.equal(r.errorReason, "unexpected_settle_error");
    assert.match(r.errorMessage ?? "", /nothing was charged/);
    assert.throws(
      () => answerThrown({ error: new Error("x"), notes: notes() }, context(true)),
      ChainUnavailableError,
    );
  });
});

describe("a mechanism that answered", () => {
  test("a success names the network and the transaction actually mined", () => {
    const r = answerResult(
      {
        result: { success: true, transaction: "0xAAA", network: "eip155:1" },
        notes: notes({ sent: true, minedReplacements: { "0xaaa": "0xbbb" } }),
      },
      context(),
    );
    assert.deepEqual(r, { success: true, transaction: "0xbbb", network });
  });

  test("a failure whose node answer was lost is pending, never failed", () => {
    const r = answerResult(
      { result: failed, notes: notes({ sent: true, ambiguousReference: "0xabc" }) },
      context(),
    );
    assert.equal(r.errorReason, "settlement_pending");
    assert.equal(r.transaction, "0xabc");
  });

  test("the transaction layer's refusal is the reason answered, even while the RPC failed", () => {
    const refusal = { reason: "gas_price_too_high", message: "gas is 900 gwei" };
    const r = answerResult({ result: failed, notes: notes({ refusal }) }, context(true));
    assert.equal(r.errorReason, "gas_price_too_high");
    assert.equal(r.errorMessage, "gas is 900 gwei");
    assert.equal(r.transaction, "");
  });

  test("a refusal with nothing sent while the RPC failed is an outage; one with a transaction stands", () => {
    assert.throws(
      () => answerResult({ result: failed, notes: notes() }, context(true)),
      ChainUnavailableError,
    );
    const sent = { ...failed, transaction: "0xdef" };
    const r = answerResult({ result: sent, notes: notes({ sent: true }) }, context(true));
    assert.equal(r.errorReason, "invalid_exact_evm_payload_signature");
    assert.equal(r.transaction, "");
    assert.equal(r.payer, "0xpayer");
  });

  test("its record made final while it ran, its send refused: that record's interruption", () => {
    const r = answerResult(
      { result: failed, notes: notes({ decidedWhileRunning: true }) },
      context(),
    );
    assert.deepEqual(
      [r.success, r.errorReason, r.transaction],
      [false, "settlement_interrupted", ""],
    );
    assert.match(r.errorMessage ?? "", /nothing was transferred/);
  });

  test("its journal entry unwritten, nothing sent and no transaction: nothing was sent (503)", () => {
    assert.throws(
      () => answerResult({ result: failed, notes: notes({ journalFailed: true }) }, context()),
      NothingSentError,
    );
  });
});

describe("the failed-fee budget spent", () => {
  const spent = {
    reason: "failed_settlement_gas_budget_spent",
    message: "spent",
    retryAfterSeconds: 42,
  };
  const budgetError = (e: unknown) =>
    e instanceof FailedFeeBudgetSpentError && e.retryAfterSeconds === 42 && e.network === network;

  test("nothing sent: the budget's refusal (503 with Retry-After), whether the mechanism answered or threw", () => {
    assert.throws(
      () => answerResult({ result: failed, notes: notes({ refusal: spent }) }, context()),
      budgetError,
    );
    assert.throws(
      () => answerThrown({ error: new Error("x"), notes: notes({ refusal: spent }) }, context()),
      budgetError,
    );
  });

  test("something sent for the payment before (a payer's funding): the refusal is the answer", () => {
    const r = answerResult(
      { result: failed, notes: notes({ sent: true, refusal: spent }) },
      context(),
    );
    assert.equal(r.errorReason, "failed_settlement_gas_budget_spent");
  });
});
