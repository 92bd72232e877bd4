/**
 * A Solana payer that moves its USDC away after our settle's simulation,
 * before our transaction executes, makes it fail on-chain at our fee
 * payer's cost. That costs us one failed transaction: the failure is
 * charged to the payer (refused on every account for the cooling period,
 * before anything is sent), never to the merchant's failure limit; and the
 * service's hourly failed-fee budget for the network bounds what many such
 * failures cost together (503 with Retry-After, nothing sent).
 *
 * Payments are signed by the official `@x402/svm` client; the ledger is
 * LiteSVM running the real SPL Token program. The payer's move is played by
 * emptying its token account just before the ledger executes our
 * transaction. What our fee payers sent and spent is read from the ledger.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { HTTPFacilitatorClient } from "@x402/core/server";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import {
  address,
  createKeyPairSignerFromBytes,
  getBase58Encoder,
  lamports,
  none,
  type Address,
} from "@solana/kit";
import {
  AccountState,
  TOKEN_PROGRAM_ADDRESS,
  getTokenEncoder,
  getTokenSize,
} from "@solana-program/token";
import { USDC_MINT, associatedTokenAccount } from "../../devnet/svm/index.js";
import { apiKeyAuth } from "../support/resourceServer.js";
import { post } from "../support/http.js";
import { startStack, type TestStack } from "../support/stack.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { solana } from "../families/solana.js";
import { requirementsFor, signedBy } from "../families/signing.js";

const PRICE = 1_000n;

/** Writes `owner`'s USDC token account holding `amount` (what a transfer of its own leaves). */
function setUsdc(stack: TestStack, ata: Address, owner: Address, amount: bigint): void {
  const ledger = stack.families.solana!.ledger;
  ledger.svm.setAccount({
    address: ata,
    data: new Uint8Array(
      getTokenEncoder().encode({
        mint: USDC_MINT,
        owner,
        amount,
        delegate: none(),
        state: AccountState.Initialized,
        isNative: none(),
        delegatedAmount: 0n,
        closeAuthority: none(),
      }),
    ),
    executable: false,
    lamports: lamports(ledger.svm.minimumBalanceForRentExemption(BigInt(getTokenSize()))),
    programAddress: TOKEN_PROGRAM_ADDRESS,
    space: BigInt(getTokenSize()),
  });
}

/** Our fee payers' sends (transactions the ledger executed) and lamports, as the ledger has them. */
function feePayersState(stack: TestStack, feePayers: readonly Address[], sends: { count: number }) {
  const ledger = stack.families.solana!.ledger;
  const balance = feePayers.reduce((sum, a) => {
    const account = ledger.account(a);
    return sum + (account.exists ? BigInt(account.lamports) : 0n);
  }, 0n);
  return { sends: sends.count, balance };
}

interface Harness {
  stack: TestStack;
  feePayers: Address[];
  sends: { count: number };
  /** Before the next transaction the ledger executes, this runs (once). */
  beforeNextSend: (() => void) | undefined;
}

async function harness(env: Record<string, string> = {}): Promise<Harness> {
  const stack = await startStack({ ...solana.stack, env: { METER_SETTLEMENTS: "true", ...env } });
  const feePayers = await Promise.all(
    stack.families.solana!.info.facilitatorSecretKeys.map(
      async (k) => (await createKeyPairSignerFromBytes(getBase58Encoder().encode(k))).address,
    ),
  );
  const h: Harness = { stack, feePayers, sends: { count: 0 }, beforeNextSend: undefined };
  const ledger = stack.families.solana!.ledger;
  const send = ledger.send.bind(ledger);
  ledger.send = (wire) => {
    const hook = h.beforeNextSend;
    h.beforeNextSend = undefined;
    hook?.();
    const outcome = send(wire);
    if (outcome.ok && !outcome.duplicate) h.sends.count++;
    return outcome;
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
  const requirements = await requirementsFor(stack, solana, PRICE);
  return { requirements, payload: await signedBy(stack, solana, payer, requirements) };
}

/** Settles payer `i`'s payment while the payer empties its token account just before ours executes. */
async function racedSettle(h: Harness, facilitator: HTTPFacilitatorClient, payer: number) {
  const owner = address(await solana.payer(h.stack, payer));
  const ata = await associatedTokenAccount(owner);
  const held = await solana.balanceOf(h.stack, owner);
  const { payload, requirements } = await payment(h.stack, payer);
  h.beforeNextSend = () => setUsdc(h.stack, ata, owner, 0n);
  const answer = await facilitator.settle(payload, requirements);
  // The payer's USDC comes back (as it would to the address it moved it to).
  setUsdc(h.stack, ata, owner, held);
  return { answer, owner, held };
}

describe("a Solana payer that moves its funds between our simulation and our transaction", () => {
  let h: Harness;

  before(async () => {
    h = await harness();
  });
  after(() => h?.stack.stop());

  test("one failed transaction at our fee, then payer_failed_onchain_recently on every account; the merchant is not charged the failure", async () => {
    const { stack } = h;
    const first = await merchant(stack, "raced solana merchant");
    const before = feePayersState(stack, h.feePayers, h.sends);
    const { answer: raced, owner } = await racedSettle(h, first.facilitator, 0);
    assert.equal(raced.success, false, JSON.stringify(raced));
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
    assert.ok(BigInt(journal.fee ?? 0) > 0n, "the failure's fee is journaled");
    assert.equal(journal.fee, journal.worst_fee, "a Solana fee is known before it is sent");
    const afterRace = feePayersState(stack, h.feePayers, h.sends);
    assert.equal(afterRace.sends - before.sends, 1);

    // Its payments are refused everywhere before anything is sent, and do
    // not verify either, while an honest payer's still do.
    const stranger = await merchant(stack, "another solana merchant");
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
    const after = feePayersState(stack, h.feePayers, h.sends);
    console.log(
      `Solana racing payer: 25 settles → ${after.sends - before.sends} transactions sent, our fee payers spent ${before.balance - after.balance} lamports (journaled fee ${journal.fee}); answers: ${[...new Set(answers)].join(" | ")}`,
    );
    assert.deepEqual(new Set(answers), new Set(["payer_failed_onchain_recently|"]));
    assert.equal(after.sends - before.sends, 1, "one failed transaction, then nothing");

    // The merchant's failure limit did not count it, and its honest customers settle.
    const honest = await payment(stack, 1);
    const ok = await first.facilitator.settle(honest.payload, honest.requirements);
    assert.equal(ok.success, true, JSON.stringify(ok));
  });
});

describe("the Solana failed-fee budget", () => {
  let h: Harness;

  before(async () => {
    // Room for one transaction in flight at its fee (the official client's:
    // two signatures and a 1-lamport priority fee, 10,001 lamports), not
    // for one more once a failure has cost its fee.
    h = await harness({ SVM_FAILED_FEE_BUDGET_SOL: "0.000015" });
  });
  after(() => h?.stack.stop());

  test("spent by a failure: the next settle answers 503 with Retry-After and sends nothing", async () => {
    const { stack } = h;
    const account = await merchant(stack, "budget merchant");
    const before = feePayersState(stack, h.feePayers, h.sends);
    const { answer: raced } = await racedSettle(h, account.facilitator, 2);
    assert.equal(raced.success, false, JSON.stringify(raced));
    const afterFailure = feePayersState(stack, h.feePayers, h.sends);
    assert.equal(afterFailure.sends - before.sends, 1);

    // An honest payer's settle would pass the budget: refused, nothing sent.
    const honest = await payment(stack, 3);
    const payerBefore = await solana.balanceOf(stack, await solana.payer(stack, 3));
    const res = await post(
      stack.url,
      "/settle",
      { x402Version: 2, paymentPayload: honest.payload, paymentRequirements: honest.requirements },
      account.key,
    );
    const body = (await res.json()) as Record<string, unknown>;
    const after = feePayersState(stack, h.feePayers, h.sends);
    console.log(
      `Solana budget of 15,000 lamports: 2 settles → ${after.sends - before.sends} transaction sent, our fee payers spent ${before.balance - after.balance} lamports; the second answered ${res.status} ${String(body["reason"])}`,
    );
    assert.equal(res.status, 503, JSON.stringify(body));
    assert.equal(body["error"], "service_unavailable");
    assert.equal(body["reason"], "failed_settlement_gas_budget_spent");
    const retryAfter = Number(res.headers.get("retry-after"));
    assert.ok(retryAfter > 0 && retryAfter <= 3600, `Retry-After ${retryAfter}`);
    assert.equal(after.sends, afterFailure.sends, "nothing sent");
    assert.equal(after.balance, afterFailure.balance, "no fee spent");
    assert.equal(await solana.balanceOf(stack, await solana.payer(stack, 3)), payerBefore);
    const budget = (await stack.service.metrics.failedGasBudget.get()).values.find(
      (v) => v.labels["network"] === solana.network,
    );
    assert.equal(budget?.value, 0.000015, "x402_failed_settlement_gas_budget_native, in SOL");
  });
});
