/**
 * One account cannot switch a network off for another with a burst of fresh
 * payers whose settles fail by their own doing. Account A submits ten
 * payers that never paid before, all at once, on a network whose hourly
 * failed-gas budget is a few settles' worth; each payer whose settle is
 * sent moves its USDC away in the block of our transaction (its transfer,
 * with a far higher tip, goes first), so our transaction reverts and the
 * failure is the payer's own. A retries the payers not yet sent, the way an
 * attacker would, until nothing more of its is sent. Account B's customer,
 * who has paid B before, then pays through the official client and must
 * settle: the budget's per-account share and its tiers keep room for B
 * where one pool for everyone would have been spent.
 *
 * What the budget holds for one settle in flight (W, its gas limit times
 * its maximum fee) is the service's own figure: predicted before the
 * service starts with the service's fee and gas-limit rules on the very
 * chain state, and read back afterwards from the journal of what was sent.
 * The devnet's base fee is let fall to its floor first, so W is the same
 * for every settle of the test.
 *
 * The service reads its journal every few seconds; a read that begins
 * while A's transactions are in flight must not go on counting them in
 * flight once they have reverted (they count as failures then), or B's
 * payment would be refused until the next read. B's payment failing here
 * is the service's fault, not the test's.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { HTTPFacilitatorClient } from "@x402/core/server";
import type { PaymentRequirements } from "@x402/core/types";
import { eip3009ABI } from "@x402/evm";
import {
  createPublicClient,
  createWalletClient,
  encodeFunctionData,
  erc20Abi,
  formatEther,
  http,
  parseSignature,
  toHex,
  type Address,
  type Hex,
  type PublicClient,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { startStack, type TestStack } from "../support/stack.js";
import { signersState } from "../support/signersState.js";
import { post } from "../support/http.js";
import { apiKeyAuth } from "../support/resourceServer.js";
import { requirementsFor, signPayment, usdcBalance } from "../chains/evm/payments.js";
import { FRONT_RUN_FEES } from "../chains/evm/settleRace.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { FeeOracle } from "../../src/chains/evm/rpc/feeOracle.js";
import { GasLimits } from "../../src/chains/evm/signer/gasLimits.js";

const NETWORK = "eip155:8453";
const CHAIN_ID = 8453;
const PAY_TO_A = "0x000000000000000000000000000000000000a0a0" as const;
const PAY_TO_B = "0x000000000000000000000000000000000000b0b0" as const;
/** Where a hostile payer moves its USDC in the block of our settle. */
const SINK = "0x0000000000000000000000000000000000005151" as const;
const PRICE = 1_000n;
const FRESH_PAYERS = 10;
/** The budget in settles' worst fees (see the arithmetic in the test). */
const BUDGET_IN_WORST_FEES = { numerator: 7n, denominator: 2n };

interface Payer {
  key: Hex;
  address: Address;
}

interface Answer {
  payer: Address;
  status: number;
  retryAfter: string | null;
  body: { success?: boolean; errorReason?: string; reason?: string; message?: string };
}

interface Round {
  answers: Answer[];
  /** The payers whose settle our signers sent (each reverted). */
  sent: Address[];
}

/**
 * What one pool for everyone (the rule before the per-account share and
 * the tiers) leaves of `budget` after `payers` fresh payers are retried
 * until none more fits: each round sends as many as the pool holds at
 * their worst fee `worst`, and each costs `fee` when it reverts.
 */
function poolOnlyLeaves(budget: bigint, worst: bigint, fee: bigint, payers: number): bigint {
  let spent = 0n;
  let left = BigInt(payers);
  for (;;) {
    const fits = (budget - spent) / worst;
    const sent = fits < left ? fits : left;
    if (sent <= 0n) return budget - spent;
    spent += sent * fee;
    left -= sent;
  }
}

describe("one account's burst of fresh failing payers (EVM devnet, a budget of a few settles)", () => {
  let stack: TestStack;
  let client: PublicClient;
  /** The network's hourly failed-gas budget, in wei, as the service is given it. */
  let budget = 0n;
  const attackers: Payer[] = Array.from({ length: FRESH_PAYERS }, () => {
    const key = generatePrivateKey();
    return { key, address: privateKeyToAccount(key).address };
  });
  // Read after `beforeService` fills it: the service starts with this budget.
  const env: Record<string, string> = {};

  before(async () => {
    stack = await startStack({
      networks: [NETWORK],
      payers: 2,
      env,
      beforeService: async (devnet) => {
        const net = devnet.networks[NETWORK]!;
        const rpc = createPublicClient({ transport: http(net.rpcUrl) }) as PublicClient;
        const usdc = net.assets["USDC"] as Hex;
        // Nearly empty blocks lower the base fee by an eighth each: let it
        // reach its floor, so the maximum fee the service offers (twice the
        // base fee plus the tip) is the same for every settle of the test.
        await rpc.request({ method: "anvil_mine" as never, params: [toHex(256)] as never });
        // Both merchants' payTo hold USDC already, and every attacker holds
        // ten prices and ether for its own transfer: all settles of the
        // test then cost the same gas.
        const funder = createWalletClient({
          account: privateKeyToAccount(net.payerPrivateKeys[0] as Hex),
          transport: http(net.rpcUrl),
        });
        const recipients: [Address, bigint][] = [
          [PAY_TO_A, 1n],
          [PAY_TO_B, 1n],
          ...attackers.map((p): [Address, bigint] => [p.address, 10n * PRICE]),
        ];
        for (const [to, amount] of recipients) {
          const hash = await funder.writeContract({
            chain: null,
            address: usdc,
            abi: erc20Abi,
            functionName: "transfer",
            args: [to, amount],
          });
          assert.equal((await rpc.waitForTransactionReceipt({ hash })).status, "success");
        }
        for (const p of attackers) {
          await rpc.request({
            method: "anvil_setBalance" as never,
            params: [p.address, toHex(10n ** 18n)] as never,
          });
        }
        // One settle's worst fee by the service's own rules (its fee
        // oracle, its gas limit for the call it sends) on an attacker's
        // payment as it stands now.
        const requirements = requirementsFor({
          network: NETWORK,
          usdc,
          payTo: PAY_TO_A,
          amount: PRICE.toString(),
        });
        const fees = await new FeeOracle(rpc, 0, undefined).forNewTransaction();
        const signer = privateKeyToAccount(net.facilitatorPrivateKeys[0] as Hex).address;
        const gas = await new GasLimits(rpc).forCall(
          signer,
          { to: usdc, data: settleCall(await signPayment(attackers[0]!.key, requirements)) },
          fees,
        );
        budget =
          (gas * fees.maxFeePerGas * BUDGET_IN_WORST_FEES.numerator) /
          BUDGET_IN_WORST_FEES.denominator;
        env[`EVM_FAILED_GAS_BUDGET_NATIVE_${CHAIN_ID}`] = formatEther(budget);
      },
    });
    client = createPublicClient({ transport: http(stack.rpcUrl) });
  });
  after(() => stack?.stop());

  async function merchant(name: string) {
    const account = await createAccount(stack.service.db, name);
    const key = (await createApiKey(stack.service.db, account.id, name)).key;
    return {
      id: account.id,
      key,
      facilitator: new HTTPFacilitatorClient({
        url: stack.url,
        createAuthHeaders: apiKeyAuth(key),
      }),
    };
  }

  const requirementsA = (): PaymentRequirements =>
    requirementsFor({
      network: NETWORK,
      usdc: stack.usdc,
      payTo: PAY_TO_A,
      amount: PRICE.toString(),
    });
  const requirementsB = (): PaymentRequirements =>
    requirementsFor({
      network: NETWORK,
      usdc: stack.usdc,
      payTo: PAY_TO_B,
      amount: PRICE.toString(),
    });

  /** Our signers' transactions waiting in the pool. */
  async function ourPending(): Promise<{ input: Hex }[]> {
    const signers = new Set(
      stack.devnet.networks[NETWORK]!.facilitatorPrivateKeys.map((k) =>
        privateKeyToAccount(k as Hex).address.toLowerCase(),
      ),
    );
    const pool = (await client.request({ method: "txpool_content" as never })) as {
      pending: Record<string, Record<string, { input: Hex }>>;
    };
    return Object.entries(pool.pending)
      .filter(([from]) => signers.has(from.toLowerCase()))
      .flatMap(([, txs]) => Object.values(txs));
  }

  /**
   * `payers` settle at once through `apiKey`. Blocks wait meanwhile; once
   * every settle is either answered or sent (in the pool), each payer whose
   * settle was sent moves its USDC away ahead of it, and one block takes
   * them all.
   */
  async function burst(payers: readonly Payer[], apiKey: string): Promise<Round> {
    await client.request({ method: "evm_setAutomine" as never, params: [false] as never });
    let answered = 0;
    let sent: Address[] = [];
    const running = payers.map(async (p): Promise<Answer> => {
      const requirements = requirementsA();
      const body = {
        x402Version: 2,
        paymentPayload: await signPayment(p.key, requirements),
        paymentRequirements: requirements,
      };
      const res = await post(stack.url, "/settle", body, apiKey);
      const answer = {
        payer: p.address,
        status: res.status,
        retryAfter: res.headers.get("retry-after"),
        body: (await res.json()) as Answer["body"],
      };
      answered++;
      return answer;
    });
    try {
      // Polls the pool and the answers, not a clock.
      let pending = await ourPending();
      while (pending.length + answered < payers.length) {
        await new Promise((r) => setTimeout(r, 20));
        pending = await ourPending();
      }
      sent = payers
        .filter((p) =>
          pending.some((tx) => tx.input.toLowerCase().includes(p.address.slice(2).toLowerCase())),
        )
        .map((p) => p.address);
      assert.equal(sent.length, pending.length, "each transaction sent is one payer's settle");
      for (const address of sent) {
        const payer = attackers.find((p) => p.address === address)!;
        const balance = await usdcBalance(stack.rpcUrl, stack.usdc, address);
        await createWalletClient({
          account: privateKeyToAccount(payer.key),
          transport: http(stack.rpcUrl),
        }).writeContract({
          chain: null,
          address: stack.usdc,
          abi: erc20Abi,
          functionName: "transfer",
          args: [SINK, balance],
          // No estimate: against the pending block it would see our settle first.
          gas: 100_000n,
          ...FRONT_RUN_FEES,
        });
      }
      if (sent.length > 0) await client.request({ method: "evm_mine" as never });
    } finally {
      await client.request({ method: "evm_setAutomine" as never, params: [true] as never });
    }
    return { answers: await Promise.all(running), sent };
  }

  test("A's ten fresh payers fail three settles and are then refused; B's customer still pays", async () => {
    const a = await merchant("attacker");
    const b = await merchant("honest merchant");
    const customer = stack.payerKeys[1]!;
    const customerAddress = privateKeyToAccount(customer).address;

    // B's customer has paid B before: a payer with a success on record.
    const earlier = await b.facilitator.settle(
      await signPayment(customer, requirementsB()),
      requirementsB(),
    );
    assert.equal(earlier.success, true, JSON.stringify(earlier));

    // A's burst, then its retries of every payer not yet sent, until a
    // round sends nothing.
    const before = await signersState(stack, client);
    const rounds: Round[] = [];
    let waiting = [...attackers];
    while (waiting.length > 0) {
      const round = await burst(waiting, a.key);
      rounds.push(round);
      if (round.sent.length === 0) break;
      waiting = waiting.filter((p) => !round.sent.includes(p.address));
    }
    const afterBurst = await signersState(stack, client);
    console.log(
      `budget ${budget} wei; rounds: ${rounds
        .map((r) => `${r.sent.length} sent, ${r.answers.length - r.sent.length} refused`)
        .join("; ")}`,
    );

    // B's customer pays through the official client: it verifies, settles,
    // and the money reaches B's payTo.
    const payToBefore = await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO_B);
    const payment = await signPayment(customer, requirementsB());
    const verdict = await b.facilitator.verify(payment, requirementsB());
    assert.equal(verdict.isValid, true, JSON.stringify(verdict));
    const settled = await b.facilitator.settle(payment, requirementsB());
    assert.equal(settled.success, true, JSON.stringify(settled));
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO_B), payToBefore + PRICE);

    // What the budget held for each of A's settles, and what each cost: the journal's.
    const journal = await stack.service.db
      .selectFrom("settlement_transactions as t")
      .innerJoin("settlements as s", "s.id", "t.settlement_id")
      .select(["t.status", "t.worst_fee", "t.fee", "s.payer"])
      .where("s.account_id", "=", a.id)
      .execute();
    const worst = BigInt(journal[0]?.worst_fee ?? 0);
    const fee = journal.reduce(
      (max, j) => (BigInt(j.fee ?? 0) > max ? BigInt(j.fee ?? 0) : max),
      0n,
    );
    console.log(`W = ${worst} wei held per settle, F = ${fee} wei per revert at most`);

    // The arithmetic, with the service's own figures: W is what the budget
    // holds for one settle in flight (gas limit × maximum fee, the
    // journal's worst fee), F what one of A's reverts cost (gas used × price
    // paid; on the devnet W ≈ 88237 gas × 1 gwei and F ≈ 0.72 W). The
    // budget is 3.5 W.
    // - The burst: A has no failure yet, so only the pool bounds it: 3 sent
    //   (3 W ≤ 3.5 W < 4 W), the other 7 refused while those are in flight.
    // - Their reverts spend 3 F. One pool for everyone (no share, no tiers)
    //   would then send A's retries while one more W fits, each spending
    //   F, until less than W is left and every account is refused for the
    //   hour: poolOnlyLeaves, which A's ten payers reach whenever F is more
    //   than about W / 4 (here: 3 + 1 sent, 0.63 W left).
    // - With the share and the tiers nothing more of A's is sent: its share,
    //   a quarter of 3.5 W, is less than one W, and new payers are refused
    //   once failures spent half (3 F ≥ 1.75 W while F ≥ 0.59 W). B's
    //   customer has a success on record, B no failure, and 3 F + W fits
    //   3.5 W while F ≤ 0.83 W.
    assert.ok(journal.length > 0, "A's settles were journaled");
    assert.ok(
      journal.every((j) => BigInt(j.worst_fee ?? -1) === worst),
      "one worst fee for all",
    );
    assert.equal(budget / worst, 3n, "the budget holds 3 of the service's worst fees, not 4");
    assert.ok(
      poolOnlyLeaves(budget, worst, fee, FRESH_PAYERS) < worst,
      "one pool for everyone would have been spent by A's ten payers",
    );
    const firstBurst = BigInt(rounds[0]!.sent.length);
    assert.ok(firstBurst * fee + worst <= budget, "room for B's payment after A's burst");

    // Broadcasts: three in the burst, none after; the journal and the
    // signers' nonces agree, and every one reverted.
    const broadcasts = rounds.flatMap((r) => r.sent);
    assert.equal(rounds[0]!.sent.length, Number(budget / worst));
    assert.deepEqual(
      rounds.slice(1).map((r) => r.sent.length),
      [0],
      "A's retries are refused, nothing sent",
    );
    assert.equal(afterBurst.nonces - before.nonces, broadcasts.length);
    assert.equal(journal.length, broadcasts.length);
    assert.ok(
      journal.every((j) => j.status === "reverted"),
      JSON.stringify(journal),
    );

    // Each sent settle is answered a failure; every other settle of A's,
    // in the burst and after it, 503 with the budget's reason and a
    // Retry-After within the hour.
    for (const round of rounds) {
      for (const answer of round.answers) {
        if (round.sent.includes(answer.payer)) {
          assert.equal(answer.body.success, false, JSON.stringify(answer));
          continue;
        }
        assert.equal(answer.status, 503, JSON.stringify(answer));
        assert.equal(
          answer.body.reason,
          "failed_settlement_gas_budget_spent",
          JSON.stringify(answer),
        );
        const seconds = Number(answer.retryAfter);
        assert.ok(
          Number.isInteger(seconds) && seconds >= 1 && seconds <= 3600,
          JSON.stringify(answer),
        );
      }
    }
    const refusedAfterBurst = rounds.slice(1).flatMap((r) => r.answers);
    assert.equal(refusedAfterBurst.length, FRESH_PAYERS - broadcasts.length);
    // After the burst, what refuses A is its own doing (its share, or the
    // tier its fresh payers fall in), and the answer says so: never that
    // the service's budget is spent for everyone.
    for (const answer of refusedAfterBurst) {
      assert.match(
        answer.body.message ?? "",
        /this account's settlements|payers with a settled payment on record/,
        JSON.stringify(answer),
      );
    }
    console.log(
      `A's settles after the burst: ${[...new Set(refusedAfterBurst.map((r) => `${r.status} ${r.body.reason}: ${r.body.message}`))].join(" | ")}`,
    );

    // Cooling: exactly the payers whose own transaction failed, none of
    // A's refused ones, and no honest payer.
    const cooled = await stack.service.db
      .selectFrom("settlements")
      .select("payer")
      .distinct()
      .where("failure_cause", "=", "payer")
      .execute();
    assert.deepEqual(
      new Set(cooled.map((r) => r.payer?.toLowerCase())),
      new Set(broadcasts.map((p) => p.toLowerCase())),
    );
    for (const key of stack.payerKeys) {
      const honest = await b.facilitator.verify(
        await signPayment(key, requirementsB()),
        requirementsB(),
      );
      assert.equal(honest.isValid, true, JSON.stringify(honest));
    }
    assert.ok(!broadcasts.includes(customerAddress));
  });
});

/** The call the service sends for an EIP-3009 payment signed by an EOA. */
function settleCall(payload: { payload: Record<string, unknown> }): Hex {
  const { authorization, signature } = payload.payload as {
    authorization: Record<string, string>;
    signature: Hex;
  };
  const sig = parseSignature(signature);
  return encodeFunctionData({
    abi: eip3009ABI,
    functionName: "transferWithAuthorization",
    args: [
      authorization["from"] as Address,
      authorization["to"] as Address,
      BigInt(authorization["value"]!),
      BigInt(authorization["validAfter"]!),
      BigInt(authorization["validBefore"]!),
      authorization["nonce"] as Hex,
      Number(sig.v ?? BigInt(sig.yParity + 27)),
      sig.r,
      sig.s,
    ],
  });
}
