/**
 * An abusive free account cannot make the service spend gas for it:
 * - a token the service does not list is refused before any chain call,
 *   however good it looks in a simulation (this one passes simulation and
 *   burns all its gas when mined);
 * - a listed token (an operator's mistake) that turns hostile between our
 *   simulation and the block (armed in the same block, ahead of the settle)
 *   still costs at most the gas ceiling per settle, and a handful of such
 *   on-chain failures an hour, charged to the account whose requirements
 *   named the token, before its settles on that network are held off (429);
 * - a suspended account is refused even a settle that costs no quota.
 * Money is read from the chain: our signers' nonces and balances.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  createPublicClient,
  createWalletClient,
  http,
  parseAbi,
  type Hex,
  type PublicClient,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { PaymentRequirements } from "@x402/core/types";
import { loadArtifacts } from "../../devnet/evm/compile.js";
import { startStack, type TestStack } from "../support/stack.js";
import { signersState } from "../support/signersState.js";
import { post } from "../support/http.js";
import { nowSeconds, signAuthorization } from "../chains/evm/authorization.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { setAccountSuspended } from "../../src/features/plans/quotaLedger.js";
import { FRONT_RUN_FEES, settleRacedBy } from "../chains/evm/settleRace.js";

const ARM_ABI = parseAbi(["function setArmed(bool armed)"]);

/** Arms or disarms the burner; `fees` ahead of the service's transaction when racing it. */
function setArmed(rpcUrl: string, key: Hex, burner: Hex, armed: boolean, fees = {}) {
  return createWalletClient({
    account: privateKeyToAccount(key),
    transport: http(rpcUrl),
  }).writeContract({
    chain: null,
    address: burner,
    abi: ARM_ABI,
    functionName: "setArmed",
    args: [armed],
    // No estimate: against the pending block it would run after our settle.
    gas: 60_000n,
    ...fees,
  });
}

const NETWORK = "eip155:8453";
const PAY_TO = "0x000000000000000000000000000000000000b00b" as Hex;

/** Deploys the hostile token; `work` sizes what a simulation of it spends. */
async function deployBurner(rpcUrl: string, deployerKey: Hex, work: bigint): Promise<Hex> {
  const artifact = (await loadArtifacts())["DevnetGasBurnerToken"]!;
  const deployer = createWalletClient({
    account: privateKeyToAccount(deployerKey),
    transport: http(rpcUrl),
  });
  const hash = await deployer.deployContract({
    chain: null,
    abi: artifact.abi as never,
    bytecode: artifact.bytecode as Hex,
    args: [work],
  });
  const client = createPublicClient({ transport: http(rpcUrl) });
  const receipt = await client.waitForTransactionReceipt({ hash });
  return receipt.contractAddress!;
}

function requirementsFor(asset: Hex, amount = "1000"): PaymentRequirements {
  return {
    scheme: "exact",
    network: NETWORK,
    asset,
    amount,
    payTo: PAY_TO,
    maxTimeoutSeconds: 300,
    extra: { name: "Gas Burner", version: "1" },
  };
}

async function body(stack: TestStack, asset: Hex, payer = 1) {
  const requirements = requirementsFor(asset);
  const paymentPayload = await signAuthorization(stack.payerKeys[payer]!, requirements, {
    to: PAY_TO,
    value: 1000n,
    validAfter: 0n,
    validBefore: nowSeconds() + 600n,
  });
  return { x402Version: 2, paymentPayload, paymentRequirements: requirements };
}

describe("an unlisted token: refused before any chain call", () => {
  let stack: TestStack;
  let client: PublicClient;
  let burner: Hex;

  before(async () => {
    stack = await startStack({ networks: [NETWORK], env: { METER_SETTLEMENTS: "true" } });
    client = createPublicClient({ transport: http(stack.rpcUrl) });
    burner = await deployBurner(stack.rpcUrl, stack.payerKeys[0]!, 0n);
  });
  after(() => stack.stop());

  test("/verify and /settle answer unsupported_asset; our signers send nothing and spend nothing", async () => {
    const b = await body(stack, burner);
    const before = await signersState(stack, client);
    const verified = (await (await post(stack.url, "/verify", b, stack.apiKey)).json()) as {
      isValid: boolean;
      invalidReason?: string;
    };
    assert.deepEqual([verified.isValid, verified.invalidReason], [false, "unsupported_asset"]);
    const settled = (await (await post(stack.url, "/settle", b, stack.apiKey)).json()) as {
      success: boolean;
      errorReason?: string;
      errorMessage?: string;
      transaction: string;
    };
    assert.deepEqual(
      [settled.success, settled.errorReason, settled.transaction],
      [false, "unsupported_asset", ""],
    );
    assert.match(settled.errorMessage ?? "", /USDC \(0x833589/, "the refusal names what is taken");
    assert.deepEqual(await signersState(stack, client), before, "nothing sent, no gas spent");
    const supported = (await (await fetch(`${stack.url}/supported`)).json()) as {
      assets: Record<string, { asset: string; symbol: string }[]>;
    };
    assert.deepEqual(
      supported.assets[NETWORK]!.map((a) => a.symbol),
      ["USDC"],
      "GET /supported lists what each network takes",
    );
  });

  test("a suspended account is refused a settle that costs no quota (a batch deposit)", async () => {
    const account = await createAccount(stack.service.db, "suspended-depositor");
    const key = (await createApiKey(stack.service.db, account.id, "k")).key;
    await setAccountSuspended(stack.service.db, account.id, true);
    const requirements = {
      scheme: "batch-settlement",
      network: NETWORK,
      asset: stack.usdc,
      amount: "1000",
      payTo: PAY_TO,
      maxTimeoutSeconds: 300,
      extra: {},
    };
    const deposit = {
      x402Version: 2,
      paymentPayload: {
        x402Version: 2,
        accepted: requirements,
        // Well formed (a malformed one is the caller's 400 before anything
        // else); never valid, and never reaching the chain.
        payload: {
          type: "deposit",
          channelConfig: {
            payer: PAY_TO,
            payerAuthorizer: PAY_TO,
            receiver: PAY_TO,
            receiverAuthorizer: PAY_TO,
            token: stack.usdc,
            withdrawDelay: 900,
            salt: `0x${"00".repeat(32)}`,
          },
          voucher: {
            channelId: `0x${"01".repeat(32)}`,
            maxClaimableAmount: "1000",
            signature: "0x01",
          },
          deposit: {
            amount: "1000",
            authorization: {
              erc3009Authorization: {
                validAfter: "0",
                validBefore: "1",
                salt: `0x${"02".repeat(32)}`,
                signature: "0x01",
              },
            },
          },
        },
      },
      paymentRequirements: requirements,
    };
    const before = await signersState(stack, client);
    const res = await post(stack.url, "/settle", deposit, key);
    assert.equal(res.status, 402, await res.clone().text());
    assert.equal(((await res.json()) as { error: string }).error, "account_suspended");
    const rows = await stack.service.db
      .selectFrom("settlements")
      .select("id")
      .where("account_id", "=", account.id)
      .execute();
    assert.equal(rows.length, 0, "refused before anything is recorded or sent");
    assert.deepEqual(await signersState(stack, client), before);
  });
});

describe("a listed hostile token: bounded per settle, and held off after a few failures", () => {
  let stack: TestStack;
  let client: PublicClient;
  let burner: Hex;
  let heavy: Hex;
  let apiKey: string;
  let accountId: string;
  // The operator lists both tokens (the mistake this test is about): the
  // service reads its configuration once the chain, and the tokens, exist.
  const env: Record<string, string> = {
    METER_SETTLEMENTS: "true",
    FAILED_SETTLES_PER_HOUR_FREE: "5",
    EVM_MAX_GAS_PER_TX: "200000",
  };

  before(async () => {
    stack = await startStack({
      networks: [NETWORK],
      payers: 4,
      env,
      beforeService: async (devnet) => {
        const info = devnet.networks[NETWORK]!;
        const deployer = info.payerPrivateKeys[0] as Hex;
        burner = await deployBurner(info.rpcUrl, deployer, 0n);
        // A simulation of this one spends well over the ceiling of 200,000 gas.
        heavy = await deployBurner(info.rpcUrl, deployer, 4000n);
        env["EXTRA_ASSETS"] = `${NETWORK},${burner},BURN,6;${NETWORK},${heavy},HEAVY,6`;
      },
    });
    client = createPublicClient({ transport: http(stack.rpcUrl) });
    const account = await createAccount(stack.service.db, "abuser");
    accountId = account.id;
    apiKey = (await createApiKey(stack.service.db, account.id, "abuser")).key;
  });
  after(() => stack.stop());

  const settle = async (b: unknown) => {
    const res = await post(stack.url, "/settle", b, apiKey);
    return {
      status: res.status,
      retryAfter: res.headers.get("retry-after"),
      body: (await res.json()) as Record<string, unknown>,
    };
  };

  test("a settle that would need more gas than the ceiling is refused gas_limit_too_high; nothing is sent", async () => {
    const before = await signersState(stack, client);
    const out = await settle(await body(stack, heavy, 2));
    assert.equal(out.status, 200);
    assert.deepEqual(
      [out.body["success"], out.body["errorReason"], out.body["transaction"]],
      [false, "gas_limit_too_high", ""],
    );
    assert.deepEqual(await signersState(stack, client), before, "no transaction, no gas");
  });

  test("a token armed against a simulation at gas price 0 is caught before sending", async () => {
    await client.waitForTransactionReceipt({
      hash: await setArmed(stack.rpcUrl, stack.payerKeys[0]!, burner, true),
    });
    try {
      const before = await signersState(stack, client);
      const out = await settle(await body(stack, burner, 1));
      assert.equal(out.status, 200);
      assert.deepEqual([out.body["success"], out.body["transaction"]], [false, ""]);
      assert.deepEqual(await signersState(stack, client), before, "no transaction, no gas");
    } finally {
      await client.waitForTransactionReceipt({
        hash: await setArmed(stack.rpcUrl, stack.payerKeys[0]!, burner, false),
      });
    }
  });

  test("50 settles that fail on-chain: 5 are sent (each at most one transaction's gas), then 429 with Retry-After", async () => {
    const before = await signersState(stack, client);
    const outcomes: string[] = [];
    let retryAfter: string | null = null;
    for (let i = 0; i < 50; i++) {
      const b = await body(stack, burner, 1 + (i % 3));
      // Armed in the block that mines the settle, after our simulation passed.
      const out = await settleRacedBy(
        stack.rpcUrl,
        () => settle(b),
        () => setArmed(stack.rpcUrl, stack.payerKeys[0]!, burner, true, FRONT_RUN_FEES),
      );
      if (out.status !== 429) {
        await client.waitForTransactionReceipt({
          hash: await setArmed(stack.rpcUrl, stack.payerKeys[0]!, burner, false),
        });
      }
      if (out.status === 429) {
        assert.equal(out.body["error"], "too_many_failed_settlements");
        retryAfter = out.retryAfter;
      } else {
        assert.equal(out.status, 200);
        assert.equal(out.body["success"], false, JSON.stringify(out.body));
      }
      outcomes.push(out.status === 429 ? "held off" : String(out.body["errorReason"]));
    }
    const sent = outcomes.filter((o) => o !== "held off").length;
    assert.equal(sent, 5, outcomes.join(", "));
    assert.ok(outcomes.slice(5).every((o) => o === "held off"));
    assert.ok(Number(retryAfter) > 0 && Number(retryAfter) <= 3600, `Retry-After ${retryAfter}`);

    const after = await signersState(stack, client);
    assert.equal(after.nonces - before.nonces, 5, "five transactions, then none");
    const spent = before.balance - after.balance;
    const fees = await stack.service.db
      .selectFrom("settlement_transactions")
      .innerJoin("settlements", "settlements.id", "settlement_transactions.settlement_id")
      .select(["settlement_transactions.fee", "settlements.status", "settlements.billed"])
      .where("settlements.account_id", "=", accountId)
      .where("settlements.asset", "=", burner.toLowerCase())
      .execute();
    assert.equal(fees.length, 5);
    assert.ok(
      fees.every((f) => f.status === "failed" && !f.billed),
      "failed, not billed",
    );
    const recorded = fees.reduce((sum, f) => sum + BigInt(f.fee ?? "0"), 0n);
    assert.equal(recorded, spent, "what the signers spent is what was recorded");
    const usage = await stack.service.db
      .selectFrom("quota_usage")
      .select(["used", "reserved"])
      .where("account_id", "=", accountId)
      .executeTakeFirst();
    assert.deepEqual(usage, { used: 0, reserved: 0 }, "reservations given back, nothing charged");
    const metric = await stack.service.metrics.gasSpent.get();
    const reverted = metric.values.find((v) => v.labels["outcome"] === "reverted");
    assert.ok(reverted && reverted.value > 0, "x402_signer_gas_spent_total counts it");
    const failed = (await stack.service.metrics.failedGas.get()).values.find(
      (v) => v.labels["network"] === NETWORK,
    );
    // A counter of floats added one failure at a time: equal up to rounding.
    const expected = Number(spent) / 1e18;
    assert.ok(
      failed !== undefined && Math.abs(failed.value - expected) <= expected * 1e-9,
      `x402_failed_settlement_gas_native_total: ${failed?.value} for ${expected}`,
    );
    const budget = (await stack.service.metrics.failedGasBudget.get()).values.find(
      (v) => v.labels["network"] === NETWORK,
    );
    assert.equal(
      budget?.value,
      0.1,
      "x402_failed_settlement_gas_budget_native: the default, 0.1 ETH",
    );
  });

  test("another account is not held off by this one's failures", async () => {
    const res = await post(stack.url, "/settle", await body(stack, burner, 3), stack.apiKey);
    assert.equal(res.status, 200, "another account is not held off by this one's failures");
  });
});
