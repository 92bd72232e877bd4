/**
 * A payer that moves its funds away after our settle's checks, before the
 * ledger runs our transaction, makes it fail on-chain at our signers' cost
 * (the fee, or the gas burnt). On every family whose failures cost us a fee
 * (Solana, NEAR, Starknet; EVM has its own suite, and an XRP Ledger payer
 * pays its own fee), that costs us one failed transaction: the failure is
 * charged to the payer (refused on every account for the cooling period,
 * before anything is sent), never to the merchant's failure limit; and the
 * service's hourly failed-fee budget for the network bounds what many such
 * failures cost together (503 with Retry-After, nothing sent).
 *
 * Payments are signed by each family's client scheme (the official
 * `@x402/svm` one for Solana); each ledger executes them for real and
 * charges our signers what its chain would. How a payer moves its funds,
 * and how our signers' sends and balance are read from the ledger, is the
 * family's `payerRace` (adapter.ts).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { HTTPFacilitatorClient } from "@x402/core/server";
import { apiKeyAuth } from "../support/resourceServer.js";
import { post } from "../support/http.js";
import { startStack, type TestStack } from "../support/stack.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import type { FamilyAdapter, PayerRace, SendWatch } from "./adapter.js";
import { families } from "./index.js";
import { requirementsFor, signedBy } from "./signing.js";

const PRICE = 1_000n;

interface Harness {
  stack: TestStack;
  sends: SendWatch;
}

async function harness(
  family: FamilyAdapter,
  race: PayerRace,
  env: Record<string, string> = {},
): Promise<Harness> {
  const stack = await startStack({ ...family.stack, env: { METER_SETTLEMENTS: "true", ...env } });
  return { stack, sends: race.watchSends(stack) };
}

/** Our signers' sends and native balance, as the ledger has them. */
async function signersState(h: Harness, race: PayerRace) {
  return { sends: h.sends.count(), balance: await race.signersBalance(h.stack) };
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

async function payment(stack: TestStack, family: FamilyAdapter, payer: number) {
  const requirements = await requirementsFor(stack, family, PRICE);
  return { requirements, payload: await signedBy(stack, family, payer, requirements) };
}

/** Settles payer `i`'s payment while the payer moves its funds away just before ours runs. */
async function racedSettle(
  h: Harness,
  family: FamilyAdapter,
  race: PayerRace,
  facilitator: HTTPFacilitatorClient,
  payer: number,
) {
  const funds = await race.funds(h.stack, payer);
  const { payload, requirements } = await payment(h.stack, family, payer);
  h.sends.beforeNext(() => funds.take());
  const answer = await facilitator.settle(payload, requirements);
  // The funds come back (as they would to the account they were moved to).
  funds.giveBack();
  return answer;
}

for (const family of families) {
  const race = family.payerRace;
  if (!race) continue;

  describe(`a ${family.name} payer that moves its funds between our checks and our transaction`, () => {
    let h: Harness;

    before(async () => {
      h = await harness(family, race);
    });
    after(() => h?.stack.stop());

    test("one failed transaction at our fee, then payer_failed_onchain_recently on every account; the merchant is not charged the failure", async () => {
      const { stack } = h;
      const first = await merchant(stack, `raced ${family.name} merchant`);
      const owner = await family.payer(stack, 0);
      const before = await signersState(h, race);
      const raced = await racedSettle(h, family, race, first.facilitator, 0);
      assert.equal(raced.success, false, JSON.stringify(raced));
      if (race.reason) assert.equal(raced.errorReason, race.reason, JSON.stringify(raced));
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
      assert.ok(fee > 0n, "the failure's fee is journaled");
      if (race.feeKnownBeforeSending) {
        assert.equal(journal.fee, journal.worst_fee, "the fee is known before it is sent");
      } else {
        assert.ok(BigInt(journal.worst_fee ?? 0) >= fee, "its worst fee bounds it");
      }
      const afterRace = await signersState(h, race);
      assert.equal(afterRace.sends - before.sends, 1);
      assert.equal(
        before.balance - afterRace.balance,
        fee + race.lostBeyondFee,
        "our signers paid the journaled fee",
      );

      // Its payments are refused everywhere before anything is sent, and do
      // not verify either, while an honest payer's still do.
      const stranger = await merchant(stack, `another ${family.name} merchant`);
      const again = await payment(stack, family, 0);
      const verdict = await stranger.facilitator.verify(again.payload, again.requirements);
      assert.deepEqual(
        [verdict.isValid, verdict.invalidReason, verdict.payer],
        [false, "payer_failed_onchain_recently", owner],
        JSON.stringify(verdict),
      );
      const answers: string[] = [];
      for (let i = 0; i < 24; i++) {
        const facilitator = i % 2 === 0 ? first.facilitator : stranger.facilitator;
        const { payload, requirements } = await payment(stack, family, 0);
        const r = await facilitator.settle(payload, requirements);
        answers.push(r.success ? "success" : `${r.errorReason}|${r.transaction}`);
      }
      const after = await signersState(h, race);
      console.log(
        `${family.name} racing payer: 25 settles → ${after.sends - before.sends} transactions sent, our ${race.signers} spent ${before.balance - after.balance} ${race.unit} (journaled fee ${journal.fee}, worst ${journal.worst_fee}); answers: ${[...new Set(answers)].join(" | ")}`,
      );
      assert.deepEqual(new Set(answers), new Set(["payer_failed_onchain_recently|"]));
      assert.equal(after.sends - before.sends, 1, "one failed transaction, then nothing");

      // The merchant's failure limit did not count it, and its honest customers settle.
      const honest = await payment(stack, family, 1);
      const ok = await first.facilitator.settle(honest.payload, honest.requirements);
      assert.equal(ok.success, true, JSON.stringify(ok));
    });
  });

  describe(`a ${family.name} payer's failure decided again from the chain`, () => {
    let h: Harness;

    before(async () => {
      h = await harness(family, race);
    });
    after(() => h?.stack.stop());

    test("as the reconciler decides a settle left pending: failed, and charged to the payer", async () => {
      const { stack } = h;
      const m = await merchant(stack, `reconciled ${family.name} merchant`);
      const funds = await race.funds(stack, 2);
      const { payload, requirements } = await payment(stack, family, 2);
      h.sends.beforeNext(() => funds.take());
      try {
        const raced = await m.facilitator.settle(payload, requirements);
        assert.equal(raced.success, false, JSON.stringify(raced));
        const row = await stack.service.db
          .selectFrom("settlements")
          .select(["id", "transaction"])
          .where("account_id", "=", m.id)
          .executeTakeFirstOrThrow();
        const journal = await stack.service.db
          .selectFrom("settlement_transactions")
          .select(["network", "reference", "signer", "detail"])
          .where("settlement_id", "=", row.id)
          .orderBy("created_at")
          .execute();
        assert.equal(journal.length, 1);
        // The journal and the request are all a reconciler has of a settle
        // whose process died before it read the chain's answer.
        const outcome = await stack.service.facilitator.reconcile({
          id: row.id,
          network: requirements.network,
          request: { x402Version: 2, paymentPayload: payload, paymentRequirements: requirements },
          transactions: journal.map((t) => ({
            network: t.network,
            reference: t.reference,
            ...(t.signer ? { signer: t.signer } : {}),
            detail: t.detail,
          })),
        });
        assert.equal(outcome.status, "failed", JSON.stringify(outcome));
        assert.equal(outcome.transaction, row.transaction);
        assert.equal(outcome.cause, "payer", JSON.stringify(outcome));
      } finally {
        funds.giveBack();
      }
    });
  });

  describe(`the ${family.name} failed-fee budget`, () => {
    let h: Harness;

    before(async () => {
      h = await harness(family, race, race.budget.env);
    });
    after(() => h?.stack.stop());

    test("spent by a failure: the next settle answers 503 with Retry-After and sends nothing", async () => {
      const { stack } = h;
      const account = await merchant(stack, `${family.name} budget merchant`);
      const before = await signersState(h, race);
      const raced = await racedSettle(h, family, race, account.facilitator, 2);
      assert.equal(raced.success, false, JSON.stringify(raced));
      const afterFailure = await signersState(h, race);
      assert.equal(afterFailure.sends - before.sends, 1);

      // An honest payer's settle would pass the budget: refused, nothing sent.
      const honest = await payment(stack, family, 3);
      const payerBefore = await family.balanceOf(stack, await family.payer(stack, 3));
      const res = await post(
        stack.url,
        "/settle",
        {
          x402Version: 2,
          paymentPayload: honest.payload,
          paymentRequirements: honest.requirements,
        },
        account.key,
      );
      const body = (await res.json()) as Record<string, unknown>;
      const after = await signersState(h, race);
      console.log(
        `${family.name} budget of ${race.budget.native}: 2 settles → ${after.sends - before.sends} transaction sent, our ${race.signers} spent ${before.balance - after.balance} ${race.unit}; the second answered ${res.status} ${String(body["reason"])}`,
      );
      assert.equal(res.status, 503, JSON.stringify(body));
      assert.equal(body["error"], "service_unavailable");
      assert.equal(body["reason"], "failed_settlement_gas_budget_spent");
      const retryAfter = Number(res.headers.get("retry-after"));
      assert.ok(retryAfter > 0 && retryAfter <= 3600, `Retry-After ${retryAfter}`);
      assert.equal(after.sends, afterFailure.sends, "nothing sent");
      assert.equal(after.balance, afterFailure.balance, "no fee spent");
      assert.equal(await family.balanceOf(stack, await family.payer(stack, 3)), payerBefore);
      const budget = (await stack.service.metrics.failedGasBudget.get()).values.find(
        (v) => v.labels["network"] === family.network,
      );
      assert.equal(
        budget?.value,
        race.budget.native,
        "x402_failed_settlement_gas_budget_native, in the native token",
      );
    });
  });
}
