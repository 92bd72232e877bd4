/**
 * Settlement under load and under pressure, on a chain that mines a block
 * every second like a real one:
 * - 120 distinct payments settled concurrently all succeed, with no nonce
 *   failures, each in its own transaction, and the money adds up; each
 *   stage and transaction phase is timed once per payment on /metrics;
 * - timers that fail change no settle (the transfer, its one transaction and
 *   the answer are as without them);
 * - a transaction priced below the base fee is replaced with higher fees and
 *   the answer names the replacement that was mined;
 * - a gas price over the configured ceiling is refused before anything is sent.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createTestClient, http, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { until } from "../support/processes.js";
import { startStack, type TestStack } from "../support/stack.js";
import { requirementsFor, signPayment, usdcBalance } from "../chains/evm/payments.js";
import { post } from "../support/http.js";

const PAY_TO = "0x6666666666666666666666666666666666666666" as Hex;

/** `<name>_count` and `_sum` of one labelled histogram series on /metrics. */
async function histogram(url: string, name: string, labels: string) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const read = (suffix: string) => {
    const line = text.split("\n").find((l) => l.startsWith(`${name}_${suffix}{${labels}}`));
    return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : 0;
  };
  return { count: read("count"), sum: read("sum") };
}

interface Settle {
  success: boolean;
  transaction: string;
  errorReason?: string;
  errorMessage?: string;
}

describe("settlement pipeline (1 s blocks)", () => {
  let stack: TestStack;
  before(async () => {
    stack = await startStack({ blockTimeSeconds: 1, payers: 8, env: { EVM_STUCK_TX_MS: "1500" } });
  });
  after(() => stack.stop());

  test("120 concurrent settles: all succeed, one transaction each, no nonce failures", async () => {
    const requirements = requirementsFor({
      network: stack.network,
      usdc: stack.usdc,
      payTo: PAY_TO,
      amount: "1000",
    });
    const bodies = await Promise.all(
      Array.from({ length: 120 }, async (_, i) => ({
        x402Version: 2,
        paymentPayload: await signPayment(
          stack.payerKeys[i % stack.payerKeys.length]!,
          requirements,
        ),
        paymentRequirements: requirements,
      })),
    );
    const before = await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO);
    const series = [
      ["x402_settle_stage_seconds", 'stage="intent"'],
      ["x402_settle_stage_seconds", 'stage="commit"'],
      ["x402_settle_stage_seconds", 'stage="mechanism"'],
      ["x402_transaction_phase_seconds", `network="${stack.network}",phase="broadcast"`],
      ["x402_transaction_phase_seconds", `network="${stack.network}",phase="inclusion"`],
    ] as const;
    const timedBefore = await Promise.all(series.map(([n, l]) => histogram(stack.url, n, l)));
    const results = await Promise.all(
      bodies.map(
        async (b) => (await (await post(stack.url, "/settle", b, stack.apiKey)).json()) as Settle,
      ),
    );
    const failures = results.filter((r) => !r.success);
    assert.deepEqual(failures, [], "every settle succeeds");
    assert.equal(
      new Set(results.map((r) => r.transaction)).size,
      120,
      "one transaction per payment",
    );
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO), before + 120n * 1000n);
    const rows = await stack.service.db
      .selectFrom("settlements")
      .select(["status", "transaction"])
      .where("pay_to", "=", PAY_TO.toLowerCase())
      .execute();
    assert.equal(rows.filter((r) => r.status === "succeeded").length, 120);
    const journaled = await stack.service.db
      .selectFrom("settlement_transactions")
      .select(["reference", "status", "signer"])
      .execute();
    assert.ok(journaled.length >= 120);
    assert.ok(new Set(journaled.map((j) => j.signer)).size > 1, "the signer pool spreads the load");
    // Timed once per payment, however many fee bumps a transaction needed.
    const timedAfter = await Promise.all(series.map(([n, l]) => histogram(stack.url, n, l)));
    series.forEach(([n, l], i) => {
      assert.equal(timedAfter[i]!.count - timedBefore[i]!.count, 120, `${n}{${l}} count`);
      assert.ok(timedAfter[i]!.sum > timedBefore[i]!.sum, `${n}{${l}} sum`);
    });
    // Waiting for the block is the mechanism's, not the stages around it.
    const mechanism = timedAfter[2]!.sum - timedBefore[2]!.sum;
    const commit = timedAfter[1]!.sum - timedBefore[1]!.sum;
    const inclusion = timedAfter[4]!.sum - timedBefore[4]!.sum;
    assert.ok(mechanism >= inclusion, `mechanism ${mechanism} s covers inclusion ${inclusion} s`);
    assert.ok(commit < mechanism, `commit ${commit} s excludes the chain's wait`);
  });

  test("timers that fail change no settle: one transfer, one transaction, answered success", async () => {
    const payTo = "0x7777777777777777777777777777777777777777" as Hex;
    const requirements = requirementsFor({
      network: stack.network,
      usdc: stack.usdc,
      payTo,
      amount: "3000",
    });
    const body = {
      x402Version: 2,
      paymentPayload: await signPayment(stack.payerKeys[1]!, requirements),
      paymentRequirements: requirements,
    };
    const { settleStage, transactionPhase } = stack.service.metrics;
    const observed = [settleStage.observe, transactionPhase.observe] as const;
    const broken = () => {
      throw new TypeError("Value is not a valid number");
    };
    settleStage.observe = broken;
    transactionPhase.observe = broken;
    let res: Settle;
    try {
      res = (await (await post(stack.url, "/settle", body, stack.apiKey)).json()) as Settle;
    } finally {
      [settleStage.observe, transactionPhase.observe] = observed;
    }
    assert.equal(res.success, true, JSON.stringify(res));
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payTo), 3000n, "moved exactly once");
    const row = await stack.service.db
      .selectFrom("settlements")
      .select(["id", "status", "transaction"])
      .where("pay_to", "=", payTo.toLowerCase())
      .executeTakeFirstOrThrow();
    assert.equal(row.status, "succeeded");
    assert.equal(row.transaction, res.transaction);
    const sent = await stack.service.db
      .selectFrom("settlement_transactions")
      .select("reference")
      .where("settlement_id", "=", row.id)
      .execute();
    assert.deepEqual(
      sent.map((t) => t.reference),
      [res.transaction],
      "one transaction, and no gap filler after it",
    );
  });

  test("a transaction not mined in time is replaced with higher fees; the answer names the mined one", async () => {
    const requirements = requirementsFor({
      network: stack.network,
      usdc: stack.usdc,
      payTo: PAY_TO,
      amount: "2000",
    });
    const payerKey = stack.payerKeys[0]!;
    const payer = privateKeyToAccount(payerKey).address;
    const body = {
      x402Version: 2,
      paymentPayload: await signPayment(payerKey, requirements),
      paymentRequirements: requirements,
    };
    const payerBefore = await usdcBalance(stack.rpcUrl, stack.usdc, payer);
    // Stop the chain from mining, as a congested chain would not include the
    // transaction, until the service has had time to replace it.
    const anvil = createTestClient({ mode: "anvil", transport: http(stack.rpcUrl) });
    await anvil.setIntervalMining({ interval: 0 });
    const pending = post(stack.url, "/settle", body, stack.apiKey);
    // Mining resumes once the service has sent a replacement.
    await until("a replacement to be sent", async () => {
      const replaced = await stack.service.db
        .selectFrom("settlement_transactions")
        .select("reference")
        .where("replaces", "is not", null)
        .execute();
      return replaced.length > 0;
    });
    await anvil.setIntervalMining({ interval: 1 });
    const res = (await (await pending).json()) as Settle;
    assert.equal(res.success, true, JSON.stringify(res));
    const txs = await stack.service.db
      .selectFrom("settlement_transactions as t")
      .innerJoin("settlements as s", "s.id", "t.settlement_id")
      .select(["t.reference", "t.replaces", "t.status", "s.transaction"])
      .where("s.payer", "=", payer.toLowerCase())
      .where("s.amount", "=", "2000")
      .orderBy("t.created_at")
      .execute();
    assert.ok(txs.length >= 2, `a replacement was sent (${txs.length} transactions)`);
    const mined = txs.find((t) => t.status === "success");
    assert.ok(mined, "one version was mined");
    assert.equal(res.transaction, mined.reference, "the answer names the mined transaction");
    assert.ok(mined.replaces, "the mined one is the replacement");
    assert.equal(
      await usdcBalance(stack.rpcUrl, stack.usdc, payer),
      payerBefore - 2000n,
      "moved exactly once",
    );
  });
});

describe("gas price ceiling", () => {
  let stack: TestStack;
  before(async () => {
    stack = await startStack({ maxGasPriceWei: 1n });
  });
  after(() => stack.stop());

  test("a settlement that would cost more than the ceiling is refused with a clear reason and not sent", async () => {
    const requirements = requirementsFor({
      network: stack.network,
      usdc: stack.usdc,
      payTo: PAY_TO,
    });
    const payerKey = stack.payerKeys[0]!;
    const payer = privateKeyToAccount(payerKey).address;
    const before = await usdcBalance(stack.rpcUrl, stack.usdc, payer);
    const body = {
      x402Version: 2,
      paymentPayload: await signPayment(payerKey, requirements),
      paymentRequirements: requirements,
    };
    const res = (await (await post(stack.url, "/settle", body, stack.apiKey)).json()) as Settle;
    assert.equal(res.success, false);
    assert.equal(res.errorReason, "gas_price_too_high");
    assert.match(res.errorMessage ?? "", /ceiling/);
    assert.equal(res.transaction, "");
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payer), before);
    const sent = await stack.service.db.selectFrom("settlement_transactions").selectAll().execute();
    assert.equal(sent.length, 0, "nothing was signed or sent");
  });
});
