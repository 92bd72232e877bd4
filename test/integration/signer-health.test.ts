/**
 * A signer account low on gas leaves the rotation: settlements go through the
 * others, the log and `x402_signer_in_rotation` say so; with every account
 * low, a settle is refused with `no_signer_available` and nothing is sent.
 * The balances and the floor they are held to are metrics in whole units.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createTestClient, http, parseEther, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { startStack, type TestStack } from "../support/stack.js";
import { requirementsFor, signPayment } from "../chains/evm/payments.js";
import { post } from "../support/http.js";

const PAY_TO = "0x9999999999999999999999999999999999999999" as Hex;

describe("signer gas health", () => {
  let stack: TestStack;
  let drained: string;
  before(async () => {
    stack = await startStack({
      // Devnet signers hold 1000 ETH; require 500.
      env: { EVM_MIN_SIGNER_BALANCE_WEI: parseEther("500").toString() },
      beforeService: async (devnet) => {
        const info = devnet.networks["eip155:8453"]!;
        drained = privateKeyToAccount(info.facilitatorPrivateKeys[0] as Hex).address;
        const anvil = createTestClient({ mode: "anvil", transport: http(info.rpcUrl) });
        await anvil.setBalance({ address: drained as Hex, value: parseEther("1") });
      },
    });
  });
  after(() => stack.stop());

  test("the low account is out of rotation, in metrics, and never used", async () => {
    const metrics = await (await fetch(`${stack.url}/metrics`)).text();
    assert.match(
      metrics,
      new RegExp(`x402_signer_in_rotation\\{network="eip155:8453",signer="${drained}"\\} 0`),
    );
    assert.match(
      metrics,
      /x402_signer_in_rotation\{network="eip155:8453",signer="0x[0-9a-fA-F]{40}"\} 1/,
    );
    // The floor beside the balances, in the same whole units: what an alert compares them with.
    assert.match(metrics, /x402_signer_balance_floor_native\{network="eip155:8453"\} 500\n/);
    assert.match(
      metrics,
      new RegExp(`x402_signer_balance_native\\{network="eip155:8453",signer="${drained}"\\} 1\\n`),
    );
    const requirements = requirementsFor({
      network: stack.network,
      usdc: stack.usdc,
      payTo: PAY_TO,
      amount: "10",
    });
    for (let i = 0; i < 6; i++) {
      const body = {
        x402Version: 2,
        paymentPayload: await signPayment(stack.payerKeys[i % 5]!, requirements),
        paymentRequirements: requirements,
      };
      const res = (await (await post(stack.url, "/settle", body, stack.apiKey)).json()) as {
        success: boolean;
      };
      assert.equal(res.success, true);
    }
    const signers = await stack.service.db
      .selectFrom("settlement_transactions")
      .select("signer")
      .execute();
    assert.equal(signers.length, 6);
    assert.ok(
      !signers.some((s) => s.signer === drained.toLowerCase()),
      "the drained account sent nothing",
    );
  });
});

describe("every signer low on gas", () => {
  let stack: TestStack;
  before(async () => {
    stack = await startStack({
      env: { EVM_MIN_SIGNER_BALANCE_WEI: parseEther("5000").toString() },
    });
  });
  after(() => stack.stop());

  test("a settle is refused with no_signer_available and nothing is sent", async () => {
    const requirements = requirementsFor({
      network: stack.network,
      usdc: stack.usdc,
      payTo: PAY_TO,
      amount: "10",
    });
    const body = {
      x402Version: 2,
      paymentPayload: await signPayment(stack.payerKeys[0]!, requirements),
      paymentRequirements: requirements,
    };
    const res = (await (await post(stack.url, "/settle", body, stack.apiKey)).json()) as {
      success: boolean;
      errorReason?: string;
      errorMessage?: string;
      transaction: string;
    };
    assert.equal(res.success, false);
    assert.equal(res.errorReason, "no_signer_available");
    assert.match(res.errorMessage ?? "", /gas balance/);
    assert.equal(res.transaction, "");
    assert.equal(
      (await stack.service.db.selectFrom("settlement_transactions").selectAll().execute()).length,
      0,
    );
  });
});
