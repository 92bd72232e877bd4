/**
 * Starknet's inclusion and executors as an operator meets them: a
 * transaction not accepted within the time budget is `settlement_pending`
 * with its hash, and a retry later learns the outcome from the chain (one
 * record, one transfer); a transaction that reverts is a failure with its
 * reason, and nothing but the executor's fee moved; an executor low on
 * STRK leaves the rotation. A burst of payments bound to one executor is
 * sent in nonce order, each signed once; when the executor's nonce moved
 * behind the service's back before a burst, every payment still lands once.
 * A payment whose simulated resource bounds could cost more than the fee
 * ceiling is refused at verify and settle, and nothing is sent.
 * (The node down and a lost answer to the send: test/families/outage.test.ts.)
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
import { until } from "../../support/processes.js";

interface SettleAnswer {
  success: boolean;
  transaction: string;
  errorReason?: string;
  errorMessage?: string;
}

describe("Starknet slow blocks, reverts and executors", () => {
  let stack: TestStack;
  let provider: RpcProvider;

  before(async () => {
    stack = await startStack({
      families: { starknet: {} },
      env: { SETTLE_TIMEOUT_MS: "1500" },
    });
    provider = new RpcProvider({ nodeUrl: stack.families.starknet!.info.rpcUrl });
  });
  after(async () => {
    await stack.stop();
  });

  const ledger = () => stack.families.starknet!.ledger;
  const info = () => stack.families.starknet!.info;
  const usdcOf = (a: string) => ledger().balanceOf(STARKNET_USDC, a);
  const requirements = (amount: string): PaymentRequirements => ({
    scheme: "exact",
    network: STARKNET_MAINNET,
    asset: STARKNET_USDC,
    amount,
    payTo: info().payTo,
    maxTimeoutSeconds: 300,
    extra: { feePayer: info().executors[0]! },
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
  /** Payers no test makes fail on-chain: a payer that did is refused while it cools. */
  const HONEST = [0, 1, 3, 4];
  const settle = async (body: unknown) =>
    (await (await post(stack.url, "/settle", body, stack.apiKey)).json()) as SettleAnswer;
  const rowsOf = (payer: string, amount: string) =>
    stack.service.db
      .selectFrom("settlements")
      .select(["status", "attempts", "transaction", "error_reason", "failure_cause"])
      .where("payer", "=", `0x${BigInt(payer).toString(16).padStart(64, "0")}`)
      .where("amount", "=", amount)
      .execute();

  /** STRK the service counted as spent on successful settlements (`x402_signer_gas_spent_total`). */
  const spent = async () =>
    (await stack.service.metrics.gasSpent.get()).values
      .filter((v) => v.labels.network === STARKNET_MAINNET && v.labels.outcome === "success")
      .reduce((sum, v) => sum + v.value, 0);

  test("not accepted in time: settlement_pending with the hash; a retry once it lands answers success, one transfer", async () => {
    const { address, body } = await signed(1, requirements("2222"));
    const before = usdcOf(address);
    const spentBefore = await spent();
    ledger().withhold = true;
    let first: SettleAnswer;
    try {
      first = await settle(body);
    } finally {
      ledger().release();
    }
    assert.equal(first.success, false);
    assert.equal(first.errorReason, "settlement_pending");
    assert.match(first.transaction, /^0x[0-9a-f]+$/);
    assert.deepEqual(
      (await rowsOf(address, "2222")).map((r) => r.status),
      ["pending"],
    );
    await until("the held transaction is accepted", async () =>
      ledger().transaction(first.transaction)?.finality === "ACCEPTED_ON_L2" ? true : undefined,
    );
    const retry = await settle(body);
    assert.deepEqual([retry.success, retry.transaction], [true, first.transaction]);
    assert.equal(usdcOf(address), before - 2222n);
    assert.deepEqual(
      (await rowsOf(address, "2222")).map((r) => [r.status, r.attempts, r.transaction]),
      [["succeeded", 2, first.transaction]],
    );
    // Its fee, no longer followed once the first answer said pending, is counted when decided.
    assert.ok((await spent()) > spentBefore, "the fee of a transaction decided late is counted");
  });

  test("a transaction that reverts (the payer emptied its balance meanwhile): success false with the reason, no amount moved", async () => {
    const { address, body } = await signed(2, requirements("3333"));
    const balance = usdcOf(address);
    const payToBefore = usdcOf(info().payTo);
    const executor = info().executors[0]!;
    const strkBefore = ledger().balanceOf(STARKNET_STRK, executor);
    ledger().withhold = true;
    let burned = false;
    try {
      const first = await settle(body);
      assert.equal(first.errorReason, "settlement_pending");
      // Between verification and inclusion the payer moves its USDC away.
      ledger().burn(STARKNET_USDC, address, balance);
      burned = true;
      ledger().release();
      await until("the held transaction is accepted", async () =>
        ledger().transaction(first.transaction)?.finality === "ACCEPTED_ON_L2" ? true : undefined,
      );
      assert.equal(ledger().transaction(first.transaction)!.execution, "REVERTED");
      const retry = await settle(body);
      assert.equal(retry.success, false);
      assert.equal(retry.errorReason, "insufficient_funds", retry.errorMessage);
      assert.equal(usdcOf(address), 0n);
      assert.equal(usdcOf(info().payTo), payToBefore);
      assert.ok(
        ledger().balanceOf(STARKNET_STRK, executor) < strkBefore,
        "the executor paid the fee",
      );
      // Decided from the chain by the retry, the revert is still the payer's:
      // kept off the merchant's failure limit, and the payer cools.
      assert.deepEqual(
        (await rowsOf(address, "3333")).map((r) => [r.status, r.error_reason, r.failure_cause]),
        [["failed", "insufficient_funds", "payer"]],
      );
    } finally {
      // Blocks and the payer's USDC come back whatever failed: later tests need both.
      ledger().release();
      if (burned) ledger().mint(STARKNET_USDC, address, balance);
    }
  });

  test("the resource bounds are the simulation's and capped: above STARKNET_MAX_FEE_STRK (1 STRK) verify and settle refuse, nothing sent", async () => {
    const { address, body } = await signed(1, requirements("4444"));
    const executor = info().executors[0]!;
    const nonceBefore = ledger().nonceAt(BigInt(executor), true);
    const usdcBefore = usdcOf(address);
    const prices = { ...ledger().gasPrices };
    // L2 gas at 250 times the local node's price: the simulation's bounds
    // for an honest payment then exceed the ceiling, as a heavy account
    // contract's would at normal prices.
    ledger().gasPrices = { ...prices, l2: prices.l2 * 250n };
    try {
      const verified = (await (await post(stack.url, "/verify", body, stack.apiKey)).json()) as {
        isValid: boolean;
        invalidReason?: string;
        invalidMessage?: string;
      };
      assert.deepEqual(
        [verified.isValid, verified.invalidReason],
        [false, "invalid_exact_starknet_fee_too_high"],
        JSON.stringify(verified),
      );
      const refused = await settle(body);
      console.log(`fee spike: ${refused.errorMessage}`);
      assert.deepEqual(
        [refused.success, refused.errorReason, refused.transaction],
        [false, "invalid_exact_starknet_fee_too_high", ""],
        JSON.stringify(refused),
      );
      assert.match(
        refused.errorMessage ?? "",
        /above the ceiling of 1000000000000000000 per transaction \(STARKNET_MAX_FEE_STRK\); nothing was sent/,
      );
      assert.equal(ledger().nonceAt(BigInt(executor), true), nonceBefore, "nothing sent");
      assert.equal(usdcOf(address), usdcBefore);
    } finally {
      ledger().gasPrices = prices;
    }
  });

  /** Settles `body`; a `settlement_pending` is asked again once its transaction is in. */
  const settleToEnd = async (body: unknown) => {
    const first = await settle(body);
    if (first.errorReason !== "settlement_pending") return first;
    await until("the pending transaction is accepted", async () =>
      ledger().transaction(first.transaction)?.finality === "ACCEPTED_ON_L2" ? true : undefined,
    );
    return settle(body);
  };
  const executorNonce = () => ledger().nonceAt(BigInt(info().executors[0]!), true);
  const journaled = (transactions: string[]) =>
    stack.service.db
      .selectFrom("settlement_transactions as t")
      .innerJoin("settlements as s", "s.id", "t.settlement_id")
      .select(["t.reference", "t.detail", "s.transaction"])
      .where("s.transaction", "in", transactions)
      .execute();

  test("a burst bound to one executor: each payment is signed once, sent in nonce order, and lands once", async () => {
    const n = 12;
    const payments = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        signed(HONEST[i % HONEST.length]!, requirements(String(4000 + i))),
      ),
    );
    const payToBefore = usdcOf(info().payTo);
    const nonceBefore = executorNonce();
    const answers = await Promise.all(payments.map((p) => settleToEnd(p.body)));
    assert.deepEqual(
      answers.map((a) => [a.success, a.errorReason]),
      answers.map(() => [true, undefined]),
    );
    const hashes = answers.map((a) => a.transaction);
    assert.equal(new Set(hashes).size, n);
    const sum = Array.from({ length: n }, (_, i) => BigInt(4000 + i)).reduce((a, b) => a + b);
    assert.equal(usdcOf(info().payTo), payToBefore + sum);
    assert.equal(executorNonce(), nonceBefore + BigInt(n));
    // One journaled transaction per payment, their nonces the n after the executor's.
    const rows = await journaled(hashes);
    assert.equal(rows.length, n);
    assert.deepEqual(
      rows.map((r) => BigInt(String(r.detail["nonce"]))).sort((a, b) => (a < b ? -1 : 1)),
      Array.from({ length: n }, (_, i) => nonceBefore + BigInt(i)),
    );
  });

  test("a success decided again (the reconciler, the reorg watch) counts its fee once; the watch confirms it in a joint read, and not a transaction the node does not know", async () => {
    const { body } = await signed(3, requirements("4950"));
    const settled = await settleToEnd(body);
    assert.equal(settled.success, true, settled.errorMessage);
    const before = await spent();
    assert.ok(before > 0, "the settle counted its fee");
    const pending = {
      network: STARKNET_MAINNET,
      request: body as never,
      transactions: [{ network: STARKNET_MAINNET, reference: settled.transaction, detail: {} }],
    };
    for (let i = 0; i < 2; i++) {
      assert.deepEqual(await stack.service.facilitator.reconcile(pending), {
        status: "succeeded",
        transaction: settled.transaction,
      });
    }
    assert.equal(await spent(), before, "decided again, not paid again");
    const unknown = "0x1234";
    const landed = await stack.service.facilitator.stillLanded(STARKNET_MAINNET, [
      unknown,
      settled.transaction,
    ]);
    assert.deepEqual([...landed], [settled.transaction]);
  });

  test("the executor's nonce moved behind the service before a burst: the refused send is signed again with the node's nonce, and every payment lands once", async () => {
    // The service knows the executor's next nonce from the burst before.
    const warm = await signed(0, requirements("4900"));
    assert.equal((await settleToEnd(warm.body)).success, true);
    const key = stack.families.starknet!.executors.find(
      (e) => BigInt(e.address) === BigInt(info().executors[0]!),
    )!;
    const direct = new Account({
      provider,
      address: key.address,
      signer: key.privateKey,
      cairoVersion: "1",
    });
    const n = 8;
    const payments = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        signed(HONEST[i % HONEST.length]!, requirements(String(5000 + i))),
      ),
    );
    const payToBefore = usdcOf(info().payTo);
    const nonceBefore = executorNonce();
    // Someone else spends the executor's next nonce (a transfer of 1 FRI to itself).
    await direct.execute(
      [
        {
          contractAddress: STARKNET_STRK,
          entrypoint: "transfer",
          calldata: [key.address, "1", "0"],
        },
      ],
      { tip: 0n },
    );
    const answers = await Promise.all(payments.map((p) => settleToEnd(p.body)));
    assert.deepEqual(
      answers.map((a) => [a.success, a.errorReason]),
      answers.map(() => [true, undefined]),
    );
    const sum = Array.from({ length: n }, (_, i) => BigInt(5000 + i)).reduce((a, b) => a + b);
    assert.equal(usdcOf(info().payTo), payToBefore + sum);
    assert.equal(executorNonce(), nonceBefore + BigInt(n) + 1n);
    // At least the first send was refused for its nonce and signed again.
    const rows = await journaled(answers.map((a) => a.transaction));
    assert.ok(rows.length > n, `${rows.length} journaled for ${n} payments`);
  });

  test("an executor low on STRK leaves the rotation and is no longer offered as feePayer", async () => {
    const [low, healthy] = info().executors as [string, string];
    const strk = ledger().balanceOf(STARKNET_STRK, low);
    ledger().burn(STARKNET_STRK, low, strk);
    try {
      // The family re-reads balances on a timer; ask now rather than wait for it.
      const pool = (
        stack.service.facilitator as unknown as {
          families: {
            family: string;
            runtimes: Map<
              string,
              { executors: { checkBalances(): Promise<void>; next(): string } }
            >;
          }[];
        }
      ).families
        .find((f) => f.family === "starknet")!
        .runtimes.get(STARKNET_MAINNET)!.executors;
      await pool.checkBalances();
      const metrics = await (await fetch(`${stack.url}/metrics`)).text();
      assert.match(
        metrics,
        new RegExp(
          `x402_signer_in_rotation\\{[^}]*signer="0x${BigInt(low).toString(16).padStart(64, "0")}"[^}]*\\} 0`,
        ),
      );
      for (let i = 0; i < 4; i++) assert.equal(BigInt(pool.next()), BigInt(healthy));
      // /supported is rebuilt at most once a second: wait for the rebuild, then it names the healthy one.
      await until("/supported offers only the healthy executor", async () => {
        const supported = (await (await fetch(`${stack.url}/supported`)).json()) as {
          kinds: { network: string; extra?: Record<string, unknown> }[];
        };
        const feePayer = supported.kinds.find((k) => k.network === STARKNET_MAINNET)?.extra?.[
          "feePayer"
        ];
        return BigInt(String(feePayer)) === BigInt(healthy) ? true : undefined;
      });
      // Payments already signed to it are still accepted: it stays a signer.
      const signers = (await (await fetch(`${stack.url}/supported`)).json()) as {
        signers: Record<string, string[]>;
      };
      assert.ok(signers.signers["starknet:*"]!.some((a) => BigInt(a) === BigInt(low)));
    } finally {
      ledger().mint(STARKNET_STRK, low, strk);
    }
  });
});
