/**
 * A payer's Starknet account is arbitrary code, and it can read the
 * transaction it runs in (its signature, resource bounds, tip and nonce).
 * The simulation that decides a settlement therefore runs the transaction
 * as it will be sent: signed by the executor, with the send's bounds, tip
 * and nonce, validated, at the pre-confirmed block. An account that passes
 * only a simulation without a signature or bounds is refused before
 * anything is sent. An account whose answer changes after the checks makes
 * our transaction revert in its own frame: the failure is the payer's
 * (it cools, the merchant's failure limit does not count it), whatever text
 * it panics with, here 'SRC9: invalid caller'. An honest payment still
 * settles. The simulation charges the fee as the sequencer will: an
 * executor that cannot cover it is refused as ours, nothing sent.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { PaymentRequirements } from "@x402/core/types";
import { Account, RpcProvider, stark } from "starknet";
import { STARKNET_MAINNET } from "../../../devnet/starknet/index.js";
import { STARKNET_STRK, STARKNET_USDC } from "../../../src/chains/starknet/networks.js";
import { outsideExecutionFor } from "../../../src/chains/starknet/clients/exactClient.js";
import { startStack, type TestStack } from "../../support/stack.js";
import { paymentRequest } from "../../chains/evm/payments.js";
import { post } from "../../support/http.js";

interface SettleAnswer {
  success: boolean;
  transaction: string;
  errorReason?: string;
  errorMessage?: string;
}

describe("a Starknet payer account that tells a simulation from the transaction as sent", () => {
  let stack: TestStack;
  let provider: RpcProvider;

  before(async () => {
    stack = await startStack({ families: { starknet: {} } });
    provider = new RpcProvider({ nodeUrl: stack.families.starknet!.info.rpcUrl });
  });
  after(async () => {
    await stack.stop();
  });

  const ledger = () => stack.families.starknet!.ledger;
  const info = () => stack.families.starknet!.info;
  const usdcOf = (a: string) => ledger().balanceOf(STARKNET_USDC, a);
  const executor = () => info().executors[0]!;
  const executorNonce = () => ledger().nonceAt(BigInt(executor()), true);
  const requirements = (amount: string, feePayer = executor()): PaymentRequirements => ({
    scheme: "exact",
    network: STARKNET_MAINNET,
    asset: STARKNET_USDC,
    amount,
    payTo: info().payTo,
    maxTimeoutSeconds: 300,
    extra: { feePayer },
  });
  /** Payer `i`'s signed payment, as the request body. */
  const signed = async (i: number, req: PaymentRequirements) => {
    const { address, privateKey } = info().payers[i]!;
    const payer = new Account({ provider, address, signer: privateKey, cairoVersion: "1" });
    const typedData = outsideExecutionFor(address, req, {
      nonce: stark.randomAddress(),
      nowSeconds: Math.floor(Date.now() / 1000),
    });
    const signature = stark.formatSignature(await payer.signMessage(typedData));
    return {
      address,
      body: paymentRequest(req, { from: address, outsideExecution: { typedData, signature } }),
    };
  };
  const settle = async (body: unknown) =>
    (await (await post(stack.url, "/settle", body, stack.apiKey)).json()) as SettleAnswer;
  const verify = async (body: unknown) =>
    (await (await post(stack.url, "/verify", body, stack.apiKey)).json()) as {
      isValid: boolean;
      invalidReason?: string;
    };
  const rowsOf = (payer: string, amount: string) =>
    stack.service.db
      .selectFrom("settlements")
      .select(["id", "status", "transaction", "error_reason", "failure_cause"])
      .where("payer", "=", `0x${BigInt(payer).toString(16).padStart(64, "0")}`)
      .where("amount", "=", amount)
      .execute();

  test("an honest payment settles", async () => {
    const { address, body } = await signed(0, requirements("6001"));
    const before = usdcOf(info().payTo);
    const answer = await settle(body);
    assert.equal(answer.success, true, JSON.stringify(answer));
    assert.equal(usdcOf(info().payTo), before + 6001n);
    assert.deepEqual(
      (await rowsOf(address, "6001")).map((r) => [r.status, r.transaction]),
      [["succeeded", answer.transaction]],
    );
  });

  test("an account that passes only a simulation without signature or bounds is refused at verify and settle; nothing is sent", async () => {
    const { address, body } = await signed(1, requirements("6002"));
    ledger().setQuirk(address, "tellsSimulation");
    try {
      const nonceBefore = executorNonce();
      const usdcBefore = usdcOf(address);
      const verdict = await verify(body);
      assert.equal(verdict.isValid, false, JSON.stringify(verdict));
      const answer = await settle(body);
      assert.deepEqual(
        [answer.success, answer.transaction],
        [false, ""],
        `caught by the simulation, not broadcast: ${JSON.stringify(answer)}`,
      );
      assert.match(answer.errorMessage ?? "", /as it will be sent reverts/);
      assert.equal(executorNonce(), nonceBefore, "nothing sent");
      assert.equal(usdcOf(address), usdcBefore);
      const rows = await rowsOf(address, "6002");
      assert.ok(
        rows.every((r) => r.transaction === null && r.failure_cause !== "requirements"),
        `nothing charged to the merchant: ${JSON.stringify(rows)}`,
      );
    } finally {
      ledger().setQuirk(address, undefined);
    }
  });

  test("an account whose answer changes after the checks reverts our transaction in its own frame: charged to the payer, who cools, and decided so again from the chain", async () => {
    const { address, body } = await signed(2, requirements("6003"));
    // The account changes its code just before the ledger takes our transaction.
    const l = ledger();
    const addInvoke = l.addInvoke.bind(l);
    l.addInvoke = (tx) => {
      l.setQuirk(address, "refusesOutside");
      l.addInvoke = addInvoke;
      return addInvoke(tx);
    };
    try {
      const answer = await settle(body);
      assert.equal(answer.success, false, JSON.stringify(answer));
      const rows = await rowsOf(address, "6003");
      assert.equal(rows.length, 1);
      const sent = rows[0]!.transaction;
      assert.match(sent ?? "", /^0x[0-9a-f]+$/, `it reached the chain: ${JSON.stringify(rows)}`);
      const record = l.transaction(sent!)!;
      assert.equal(record.execution, "REVERTED");
      assert.match(record.revertReason ?? "", /invalid caller/);
      assert.deepEqual(
        [rows[0]!.status, rows[0]!.failure_cause],
        ["failed", "payer"],
        "charged to the payer, never to the merchant",
      );
      // The payer cools: its next payment is refused before anything is sent.
      const again = await signed(2, requirements("6004"));
      const verdict = await verify(again.body);
      assert.deepEqual(
        [verdict.isValid, verdict.invalidReason],
        [false, "payer_failed_onchain_recently"],
      );
      // The reconciler, deciding the same transaction from the chain alone, agrees.
      const outcome = await stack.service.facilitator.reconcile({
        id: rows[0]!.id,
        network: STARKNET_MAINNET,
        request: body as never,
        transactions: [{ network: STARKNET_MAINNET, reference: sent!, detail: {} }],
      });
      assert.deepEqual([outcome.status, "cause" in outcome && outcome.cause], ["failed", "payer"]);
    } finally {
      l.addInvoke = addInvoke;
      l.setQuirk(address, undefined);
    }
  });

  test("the simulation charges the fee as the sequencer will: an executor whose STRK cannot cover the bounds is ours to fix, and nothing is sent", async () => {
    const broke = info().executors[1]!;
    const strk = ledger().balanceOf(STARKNET_STRK, broke);
    ledger().burn(STARKNET_STRK, broke, strk);
    try {
      const { address, body } = await signed(3, requirements("6005", broke));
      const nonceBefore = ledger().nonceAt(BigInt(broke), true);
      const verdict = await verify(body);
      assert.deepEqual(
        [verdict.isValid, verdict.invalidReason],
        [false, "no_signer_available"],
        JSON.stringify(verdict),
      );
      const answer = await settle(body);
      assert.deepEqual([answer.success, answer.errorReason], [false, "no_signer_available"]);
      assert.equal(ledger().nonceAt(BigInt(broke), true), nonceBefore, "nothing sent");
      assert.ok(
        (await rowsOf(address, "6005")).every((r) => r.failure_cause !== "payer"),
        "the payer is not charged",
      );
    } finally {
      ledger().mint(STARKNET_STRK, broke, strk);
    }
  });
});
