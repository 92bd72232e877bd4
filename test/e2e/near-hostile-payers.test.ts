/**
 * A NEAR payer that moves its USDC away after our settle's checks, before
 * our relayed transaction runs, makes the `ft_transfer` fail on-chain at
 * our relayer's cost (the gas it burnt). That costs us one failed
 * transaction: the failure is charged to the payer (refused on every
 * account for the cooling period, before anything is sent), never to the
 * merchant's failure limit; and the service's hourly failed-fee budget for
 * the network bounds what many such failures cost together (503 with
 * Retry-After, nothing sent).
 *
 * Payments are signed by this project's NEAR client scheme; the ledger runs
 * the NEP-141 token and charges the relayer the gas nearcore would. The
 * payer's move is its own `ft_transfer`, played just before the ledger
 * takes our transaction. What our relayers sent and spent is read from the
 * ledger.
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
import { near } from "../families/near.js";
import { requirementsFor, signedBy } from "../families/signing.js";

const PRICE = 1_000n;
/** Where a racing payer's USDC goes for the race (another registered account). */
const ASIDE = 4;

/** Our relayers' sends (transactions the ledger took) and yoctoNEAR, as the ledger has them. */
function relayersState(stack: TestStack, sends: Set<string>) {
  const running = stack.families.near!;
  const balance = running.info.relayers.reduce(
    (sum, r) => sum + running.ledger.balance(r.accountId),
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
  const stack = await startStack({ ...near.stack, env: { METER_SETTLEMENTS: "true", ...env } });
  const h: Harness = { stack, sends: new Set(), beforeNextSend: undefined };
  const ledger = stack.families.near!.ledger;
  const submit = ledger.submit.bind(ledger);
  ledger.submit = (base64) => {
    const hook = h.beforeNextSend;
    h.beforeNextSend = undefined;
    hook?.();
    const hash = submit(base64);
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
  const requirements = await requirementsFor(stack, near, PRICE);
  return { requirements, payload: await signedBy(stack, near, payer, requirements) };
}

/** `from` sends `amount` of its USDC to `to` with an `ft_transfer` of its own. */
function moveUsdc(stack: TestStack, from: string, to: string, amount: bigint): void {
  const running = stack.families.near!;
  running.ledger
    .token(running.info.assets.USDC)!
    .call(
      "ft_transfer",
      Buffer.from(JSON.stringify({ receiver_id: to, amount: amount.toString() })),
      { predecessor: from, deposit: 1n, view: false },
    );
}

/** Settles payer `i`'s payment while the payer moves its USDC away just before ours runs. */
async function racedSettle(h: Harness, facilitator: HTTPFacilitatorClient, payer: number) {
  const owner = await near.payer(h.stack, payer);
  const aside = await near.payer(h.stack, ASIDE);
  const held = await near.balanceOf(h.stack, owner);
  const { payload, requirements } = await payment(h.stack, payer);
  h.beforeNextSend = () => moveUsdc(h.stack, owner, aside, held);
  const answer = await facilitator.settle(payload, requirements);
  // The payer's USDC comes back (as it would to the account it moved it to).
  moveUsdc(h.stack, aside, owner, held);
  return { answer, owner };
}

describe("a NEAR payer that moves its funds between our checks and our relayed transaction", () => {
  let h: Harness;

  before(async () => {
    h = await harness();
  });
  after(() => h?.stack.stop());

  test("one failed transaction at our gas, then payer_failed_onchain_recently on every account; the merchant is not charged the failure", async () => {
    const { stack } = h;
    const first = await merchant(stack, "raced near merchant");
    const before = relayersState(stack, h.sends);
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
    assert.ok(fee > 0n, "the gas the failure burnt is journaled");
    assert.ok(BigInt(journal.worst_fee ?? 0) >= fee, "its worst fee bounds it");
    const afterRace = relayersState(stack, h.sends);
    assert.equal(afterRace.sends - before.sends, 1);
    // What the relayer lost: the gas burnt, and the 1 yoctoNEAR deposit (back to the payer).
    assert.equal(before.balance - afterRace.balance, fee + 1n);

    // Its payments are refused everywhere before anything is sent, and do
    // not verify either, while an honest payer's still do.
    const stranger = await merchant(stack, "another near merchant");
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
    const after = relayersState(stack, h.sends);
    console.log(
      `NEAR racing payer: 25 settles → ${after.sends - before.sends} transactions sent, our relayers spent ${before.balance - after.balance} yoctoNEAR (journaled fee ${journal.fee}, worst ${journal.worst_fee}); answers: ${[...new Set(answers)].join(" | ")}`,
    );
    assert.deepEqual(new Set(answers), new Set(["payer_failed_onchain_recently|"]));
    assert.equal(after.sends - before.sends, 1, "one failed transaction, then nothing");

    // The merchant's failure limit did not count it, and its honest customers settle.
    const honest = await payment(stack, 1);
    const ok = await first.facilitator.settle(honest.payload, honest.requirements);
    assert.equal(ok.success, true, JSON.stringify(ok));
  });
});

describe("the NEAR failed-fee budget", () => {
  let h: Harness;

  before(async () => {
    // Room for one transaction in flight at its worst fee (the client's 30
    // TGas plus 10 TGas for the receipts, at the ledger's gas price of
    // 100,000,000 yoctoNEAR, and the 1 yoctoNEAR deposit: 0.004 NEAR), not
    // for one more once a failure has burnt its gas (0.00032 NEAR).
    h = await harness({ NEAR_FAILED_FEE_BUDGET_NEAR: "0.0042" });
  });
  after(() => h?.stack.stop());

  test("spent by a failure: the next settle answers 503 with Retry-After and sends nothing", async () => {
    const { stack } = h;
    const account = await merchant(stack, "near budget merchant");
    const before = relayersState(stack, h.sends);
    const { answer: raced } = await racedSettle(h, account.facilitator, 2);
    assert.equal(raced.success, false, JSON.stringify(raced));
    const afterFailure = relayersState(stack, h.sends);
    assert.equal(afterFailure.sends - before.sends, 1);

    // An honest payer's settle would pass the budget: refused, nothing sent.
    const honest = await payment(stack, 3);
    const payerBefore = await near.balanceOf(stack, await near.payer(stack, 3));
    const res = await post(
      stack.url,
      "/settle",
      { x402Version: 2, paymentPayload: honest.payload, paymentRequirements: honest.requirements },
      account.key,
    );
    const body = (await res.json()) as Record<string, unknown>;
    const after = relayersState(stack, h.sends);
    console.log(
      `NEAR budget of 0.0042 NEAR: 2 settles → ${after.sends - before.sends} transaction sent, our relayers spent ${before.balance - after.balance} yoctoNEAR; the second answered ${res.status} ${String(body["reason"])}`,
    );
    assert.equal(res.status, 503, JSON.stringify(body));
    assert.equal(body["error"], "service_unavailable");
    assert.equal(body["reason"], "failed_settlement_gas_budget_spent");
    const retryAfter = Number(res.headers.get("retry-after"));
    assert.ok(retryAfter > 0 && retryAfter <= 3600, `Retry-After ${retryAfter}`);
    assert.equal(after.sends, afterFailure.sends, "nothing sent");
    assert.equal(after.balance, afterFailure.balance, "no gas spent");
    assert.equal(await near.balanceOf(stack, await near.payer(stack, 3)), payerBefore);
    const budget = (await stack.service.metrics.failedGasBudget.get()).values.find(
      (v) => v.labels["network"] === near.network,
    );
    assert.equal(budget?.value, 0.0042, "x402_failed_settlement_gas_budget_native, in NEAR");
  });
});
