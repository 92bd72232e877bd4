/**
 * A Starknet payer that moves its USDC away after our settle's simulation,
 * before our executor's transaction runs, makes it revert on-chain at our
 * executor's cost (the fee of a reverted transaction). That costs us one
 * reverted transaction: the revert is charged to the payer (refused on
 * every account for the cooling period, before anything is sent), never to
 * the merchant's failure limit; and the service's hourly failed-fee budget
 * for the network bounds what many such reverts cost together (503 with
 * Retry-After, nothing sent).
 *
 * Payments are signed by this project's Starknet client scheme; the ledger
 * runs the SNIP-9 accounts and the ERC-20 token and charges the executor the
 * fee in STRK. The payer's move is played by taking its USDC just before the
 * ledger takes our transaction (it runs at the next block). What our
 * executors sent and spent is read from the ledger.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { HTTPFacilitatorClient } from "@x402/core/server";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { apiKeyAuth } from "../support/resourceServer.js";
import { post } from "../support/http.js";
import { startStack, type TestStack } from "../support/stack.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { STARKNET_STRK, STARKNET_USDC } from "../../src/chains/starknet/networks.js";
import { starknet } from "../families/starknet.js";
import { requirementsFor, signedBy } from "../families/signing.js";

const PRICE = 1_000n;

/** Our executors' sends (transactions the ledger took) and STRK (FRI), as the ledger has them. */
function executorsState(stack: TestStack, sends: Set<string>) {
  const running = stack.families.starknet!;
  const balance = running.info.executors.reduce(
    (sum, address) => sum + running.ledger.balanceOf(STARKNET_STRK, address),
    0n,
  );
  return { sends: sends.size, balance };
}

interface Harness {
  stack: TestStack;
  sends: Set<string>;
  /** Before the ledger takes the next transaction, this runs (once). */
  beforeNextSend: (() => void) | undefined;
}

async function harness(env: Record<string, string> = {}): Promise<Harness> {
  const stack = await startStack({
    ...starknet.stack,
    env: { METER_SETTLEMENTS: "true", ...env },
  });
  const h: Harness = { stack, sends: new Set(), beforeNextSend: undefined };
  const ledger = stack.families.starknet!.ledger;
  const addInvoke = ledger.addInvoke.bind(ledger);
  ledger.addInvoke = (tx) => {
    const hook = h.beforeNextSend;
    h.beforeNextSend = undefined;
    hook?.();
    const hash = addInvoke(tx);
    h.sends.add(hash);
    return hash;
  };
  return h;
}

async function merchant(stack: TestStack, name: string) {
  const account = await createAccount(stack.service.db, name);
  const key = (await createApiKey(stack.service.db, account.id, name)).key;
  return {
    id: account.id,
    key,
    facilitator: new HTTPFacilitatorClient({ url: stack.url, createAuthHeaders: apiKeyAuth(key) }),
  };
}

async function payment(
  stack: TestStack,
  payer: number,
): Promise<{ payload: PaymentPayload; requirements: PaymentRequirements }> {
  const requirements = await requirementsFor(stack, starknet, PRICE);
  return { requirements, payload: await signedBy(stack, starknet, payer, requirements) };
}

/** Settles payer `i`'s payment while the payer moves its USDC away just before ours is taken. */
async function racedSettle(h: Harness, facilitator: HTTPFacilitatorClient, payer: number) {
  const ledger = h.stack.families.starknet!.ledger;
  const owner = await starknet.payer(h.stack, payer);
  const held = await starknet.balanceOf(h.stack, owner);
  const { payload, requirements } = await payment(h.stack, payer);
  h.beforeNextSend = () => ledger.burn(STARKNET_USDC, owner, held);
  const answer = await facilitator.settle(payload, requirements);
  // The payer's USDC comes back (as it would to the address it moved it to).
  ledger.mint(STARKNET_USDC, owner, held);
  return { answer, owner };
}

describe("a Starknet payer that moves its funds between our simulation and our transaction", () => {
  let h: Harness;

  before(async () => {
    h = await harness();
  });
  after(() => h?.stack.stop());

  test("one reverted transaction at our fee, then payer_failed_onchain_recently on every account; the merchant is not charged the failure", async () => {
    const { stack } = h;
    const first = await merchant(stack, "raced starknet merchant");
    const before = executorsState(stack, h.sends);
    const { answer: raced, owner } = await racedSettle(h, first.facilitator, 0);
    assert.equal(raced.success, false, JSON.stringify(raced));
    assert.equal(raced.errorReason, "insufficient_funds", JSON.stringify(raced));
    const row = await stack.service.db
      .selectFrom("settlements")
      .select(["status", "failure_cause", "transaction"])
      .where("account_id", "=", first.id)
      .executeTakeFirstOrThrow();
    assert.equal(row.status, "failed");
    assert.notEqual(row.transaction, null, "sent");
    assert.equal(row.failure_cause, "payer", "charged to the payer, not the merchant");
    const journal = await stack.service.db
      .selectFrom("settlement_transactions")
      .select(["status", "fee", "worst_fee"])
      .where("reference", "=", row.transaction!)
      .executeTakeFirstOrThrow();
    assert.equal(journal.status, "reverted");
    const fee = BigInt(journal.fee ?? 0);
    assert.ok(fee > 0n, "the revert's fee is journaled");
    assert.ok(
      BigInt(journal.worst_fee ?? 0) >= fee,
      "its worst fee (the resource bounds) bounds it",
    );
    const afterRace = executorsState(stack, h.sends);
    assert.equal(afterRace.sends - before.sends, 1);
    assert.equal(before.balance - afterRace.balance, fee, "the executor paid the receipt's fee");

    // Its payments are refused everywhere before anything is sent, and do
    // not verify either, while an honest payer's still do.
    const stranger = await merchant(stack, "another starknet merchant");
    const again = await payment(stack, 0);
    const verdict = await stranger.facilitator.verify(again.payload, again.requirements);
    assert.deepEqual(
      [verdict.isValid, verdict.invalidReason, verdict.payer],
      [false, "payer_failed_onchain_recently", owner],
      JSON.stringify(verdict),
    );
    const answers: string[] = [];
    for (let i = 0; i < 24; i++) {
      const facilitator = i % 2 === 0 ? first.facilitator : stranger.facilitator;
      const { payload, requirements } = await payment(stack, 0);
      const r = await facilitator.settle(payload, requirements);
      answers.push(r.success ? "success" : `${r.errorReason}|${r.transaction}`);
    }
    const after = executorsState(stack, h.sends);
    console.log(
      `Starknet racing payer: 25 settles → ${after.sends - before.sends} transactions sent, our executors spent ${before.balance - after.balance} FRI (journaled fee ${journal.fee}, worst ${journal.worst_fee}); answers: ${[...new Set(answers)].join(" | ")}`,
    );
    assert.deepEqual(new Set(answers), new Set(["payer_failed_onchain_recently|"]));
    assert.equal(after.sends - before.sends, 1, "one reverted transaction, then nothing");

    // The merchant's failure limit did not count it, and its honest customers settle.
    const honest = await payment(stack, 1);
    const ok = await first.facilitator.settle(honest.payload, honest.requirements);
    assert.equal(ok.success, true, JSON.stringify(ok));
  });
});

describe("the Starknet failed-fee budget", () => {
  let h: Harness;

  before(async () => {
    // Room for one transaction in flight at its worst fee (the simulation's
    // resource bounds: about 0.0153 STRK on the ledger), not for one more
    // once a revert has cost its fee (about 0.0044 STRK).
    h = await harness({ STARKNET_FAILED_FEE_BUDGET_STRK: "0.017" });
  });
  after(() => h?.stack.stop());

  test("spent by a revert: the next settle answers 503 with Retry-After and sends nothing", async () => {
    const { stack } = h;
    const account = await merchant(stack, "starknet budget merchant");
    const before = executorsState(stack, h.sends);
    const { answer: raced } = await racedSettle(h, account.facilitator, 2);
    assert.equal(raced.success, false, JSON.stringify(raced));
    const afterFailure = executorsState(stack, h.sends);
    assert.equal(afterFailure.sends - before.sends, 1);

    // An honest payer's settle would pass the budget: refused, nothing sent.
    const honest = await payment(stack, 3);
    const payerBefore = await starknet.balanceOf(stack, await starknet.payer(stack, 3));
    const res = await post(
      stack.url,
      "/settle",
      { x402Version: 2, paymentPayload: honest.payload, paymentRequirements: honest.requirements },
      account.key,
    );
    const body = (await res.json()) as Record<string, unknown>;
    const after = executorsState(stack, h.sends);
    console.log(
      `Starknet budget of 0.017 STRK: 2 settles → ${after.sends - before.sends} transaction sent, our executors spent ${before.balance - after.balance} FRI; the second answered ${res.status} ${String(body["reason"])}`,
    );
    assert.equal(res.status, 503, JSON.stringify(body));
    assert.equal(body["error"], "service_unavailable");
    assert.equal(body["reason"], "failed_settlement_gas_budget_spent");
    const retryAfter = Number(res.headers.get("retry-after"));
    assert.ok(retryAfter > 0 && retryAfter <= 3600, `Retry-After ${retryAfter}`);
    assert.equal(after.sends, afterFailure.sends, "nothing sent");
    assert.equal(after.balance, afterFailure.balance, "no fee spent");
    assert.equal(await starknet.balanceOf(stack, await starknet.payer(stack, 3)), payerBefore);
    const budget = (await stack.service.metrics.failedGasBudget.get()).values.find(
      (v) => v.labels["network"] === starknet.network,
    );
    assert.equal(budget?.value, 0.017, "x402_failed_settlement_gas_budget_native, in STRK");
  });
});
