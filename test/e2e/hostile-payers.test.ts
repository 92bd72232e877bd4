/**
 * A payer whose address carries code cannot make us pay for it, nor switch a
 * merchant off. Its ERC-1271 check burns gas and answers "valid" only when
 * `tx.gasprice` is 0 (true of a simulation without a fee, never on-chain):
 * planted with `anvil_setCode` as a contract wallet, and as an EOA's EIP-7702
 * delegation. Payments are made with the official `@x402/evm` exact client
 * and settled through `HTTPFacilitatorClient`, and what our signers sent and
 * spent is read from the chain.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { HTTPFacilitatorClient } from "@x402/core/server";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import type { ClientEvmSigner } from "@x402/evm";
import {
  concatHex,
  createPublicClient,
  createWalletClient,
  erc20Abi,
  http,
  pad,
  toHex,
  type Address,
  type Hex,
  type PublicClient,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { loadArtifacts } from "../../devnet/evm/compile.js";
import { apiKeyAuth } from "../support/resourceServer.js";
import { startStack, type TestStack } from "../support/stack.js";
import { signersState } from "../support/signersState.js";
import { transferFromDevnetPayer } from "../chains/evm/devnetChain.js";
import {
  requirementsFor,
  signPayment,
  signPaymentWith,
  usdcBalance,
} from "../chains/evm/payments.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { FRONT_RUN_FEES, settleRacedBy } from "../chains/evm/settleRace.js";

const NETWORK = "eip155:8453";
const PAY_TO = "0x000000000000000000000000000000000000c0de" as const;
const PRICE = 1_000n;
/** Burn rounds in each signature check: about 2M gas, as in the review's probe. */
const HEAVY_BURN = 4_500n;
/** A check that burns little: only simulating with our fee tells it apart. */
const LIGHT_BURN = 50n;
/**
 * A check as costly as a passkey (P-256) check in Solidity, about 200k gas:
 * above a payment shape's own ceiling, within the contract-wallet allowance.
 */
const PASSKEY_LIKE_BURN = 450n;
/** The ERC-1967 implementation slot, where a proxy wallet names its logic. */
const IMPLEMENTATION_SLOT = "0x360894a13ba1a3210667c828492db98dca3e2076cc3735a920a3ca505d382bbc";

/** A client signer for a hostile payer: its "signature" is the burn rounds (and "valid at any price"). */
function hostileSigner(address: Address, rounds: bigint, alwaysValid = false): ClientEvmSigner {
  return {
    address,
    signTypedData: () =>
      Promise.resolve(
        concatHex([
          pad(toHex(rounds), { size: 32 }),
          ...(alwaysValid ? [pad(toHex(1), { size: 32 })] : []),
        ]),
      ),
  };
}

describe("hostile payers with code (ERC-1271 wallet, EIP-7702 delegation)", () => {
  let stack: TestStack;
  let client: PublicClient;
  let walletCode: Hex;
  let proxyCode: Hex;
  let delegate: Address;
  /** The same wallet code at an address the operator lists as a known implementation. */
  const knownImplementation = privateKeyToAccount(generatePrivateKey()).address;

  before(async () => {
    stack = await startStack({
      networks: [NETWORK],
      payers: 2,
      env: {
        METER_SETTLEMENTS: "true",
        EVM_KNOWN_WALLET_IMPLEMENTATIONS: knownImplementation,
      },
    });
    client = createPublicClient({ transport: http(stack.rpcUrl) });
    const artifacts = await loadArtifacts();
    walletCode = artifacts["DevnetGasPriceSwitchWallet"]!.deployedBytecode;
    proxyCode = artifacts["DevnetERC1967Proxy"]!.deployedBytecode;
    delegate = privateKeyToAccount(generatePrivateKey()).address;
    await plant(delegate, walletCode);
    await plant(knownImplementation, walletCode);
  });
  after(() => stack?.stop());

  async function plant(address: Address, code: Hex): Promise<void> {
    await client.request({ method: "anvil_setCode" as never, params: [address, code] as never });
  }

  const fund = (address: Address, amount: bigint) =>
    transferFromDevnetPayer(stack, stack.usdc, address, amount);

  async function payment(
    signer: ClientEvmSigner,
  ): Promise<{ payload: PaymentPayload; requirements: PaymentRequirements }> {
    const requirements = requirementsFor({
      network: NETWORK,
      usdc: stack.usdc,
      payTo: PAY_TO,
      amount: PRICE.toString(),
    });
    return { requirements, payload: await signPaymentWith(signer, requirements) };
  }

  /** A merchant of its own (a Free account) and its facilitator client. */
  async function merchant(name: string): Promise<HTTPFacilitatorClient> {
    return (await merchantAccount(name)).facilitator;
  }

  async function merchantAccount(name: string) {
    const account = await createAccount(stack.service.db, name);
    const key = (await createApiKey(stack.service.db, account.id, name)).key;
    return {
      id: account.id,
      facilitator: new HTTPFacilitatorClient({
        url: stack.url,
        createAuthHeaders: apiKeyAuth(key),
      }),
    };
  }

  /** 25 settles by one hostile payer, then the merchant's honest customer pays. */
  async function attack(payer: Address, rounds: bigint, label: string) {
    const facilitator = await merchant(label);
    await fund(payer, 100n * PRICE);
    const before = await signersState(stack, client);
    const answers: string[] = [];
    for (let i = 0; i < 25; i++) {
      const { payload, requirements } = await payment(hostileSigner(payer, rounds));
      try {
        const r = await facilitator.settle(payload, requirements);
        answers.push(r.success ? "success" : `${r.errorReason}: ${r.errorMessage ?? ""}`);
      } catch (e) {
        answers.push(`refused: ${(e as Error).message.slice(0, 80)}`);
      }
    }
    const after = await signersState(stack, client);
    const broadcasts = after.nonces - before.nonces;
    const spentWei = before.balance - after.balance;
    console.log(
      `${label}: 25 hostile settles → ${broadcasts} broadcasts, our signers spent ${spentWei} wei; answers: ${[...new Set(answers)].join(" | ")}`,
    );
    assert.ok(broadcasts <= 2, `at most 2 broadcasts, got ${broadcasts}: ${answers.join(", ")}`);
    assert.ok(!answers.includes("success"), "no hostile settle succeeds");
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payer), 100n * PRICE);

    // The merchant's next honest payment settles and moves the money.
    const honest = requirementsFor({
      network: NETWORK,
      usdc: stack.usdc,
      payTo: PAY_TO,
      amount: PRICE.toString(),
    });
    const payToBefore = await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO);
    const r = await facilitator.settle(await signPayment(stack.payerKeys[1]!, honest), honest);
    assert.equal(r.success, true, JSON.stringify(r));
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO), payToBefore + PRICE);
    return { broadcasts, spentWei };
  }

  test("a contract wallet whose check burns little: at most 2 broadcasts in 25, the merchant still settles", async () => {
    const wallet = privateKeyToAccount(generatePrivateKey()).address;
    await plant(wallet, walletCode);
    await attack(wallet, LIGHT_BURN, "ERC-1271 wallet, light check");
  });

  test("a contract wallet planted with anvil_setCode, burning ~2M gas: at most 2 broadcasts in 25, the merchant still settles", async () => {
    const wallet = privateKeyToAccount(generatePrivateKey()).address;
    await plant(wallet, walletCode);
    await attack(wallet, HEAVY_BURN, "ERC-1271 wallet, heavy check");
  });

  test("an EOA delegated with EIP-7702 to the same code: at most 2 broadcasts in 25, the merchant still settles", async () => {
    const eoa = privateKeyToAccount(generatePrivateKey()).address;
    await plant(eoa, concatHex(["0xef0100", delegate]));
    await attack(eoa, HEAVY_BURN, "EIP-7702 delegated EOA, heavy check");
  });

  test("a wallet that pays, but burns ~2M gas in its check first, is refused gas_limit_too_high: nothing sent", async () => {
    const facilitator = await merchant("burning payer");
    const wallet = privateKeyToAccount(generatePrivateKey()).address;
    await plant(wallet, walletCode);
    await fund(wallet, 10n * PRICE);
    const before = await signersState(stack, client);
    const { payload, requirements } = await payment(hostileSigner(wallet, HEAVY_BURN, true));
    const r = await facilitator.settle(payload, requirements);
    const after = await signersState(stack, client);
    console.log(
      `paying wallet, heavy check: ${after.nonces - before.nonces} broadcasts, our signers spent ${before.balance - after.balance} wei; answer: ${r.errorReason ?? "success"}`,
    );
    assert.deepEqual([r.success, r.errorReason, r.transaction], [false, "gas_limit_too_high", ""]);
    assert.deepEqual(after, before, "no transaction, no gas");
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, wallet), 10n * PRICE);
  });

  /** A fresh ERC-1967 proxy wallet naming `implementation`, funded for ten payments. */
  async function proxyWallet(implementation: Address): Promise<Address> {
    const wallet = privateKeyToAccount(generatePrivateKey()).address;
    await plant(wallet, proxyCode);
    await client.request({
      method: "anvil_setStorageAt" as never,
      params: [wallet, IMPLEMENTATION_SLOT, pad(implementation, { size: 32 })] as never,
    });
    await fund(wallet, 10n * PRICE);
    return wallet;
  }

  /** One settle of `rounds` at `payer` (valid at any price), through a merchant of its own. */
  async function settleCheck(payer: Address, rounds: bigint, label: string) {
    const facilitator = await merchant(label);
    const before = await signersState(stack, client);
    const payToBefore = await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO);
    const { payload, requirements } = await payment(hostileSigner(payer, rounds, true));
    const r = await facilitator.settle(payload, requirements);
    const after = await signersState(stack, client);
    const paid = (await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO)) - payToBefore;
    console.log(
      `${label}: ${r.success ? "success" : r.errorReason}, ${after.nonces - before.nonces} broadcasts, payTo +${paid}`,
    );
    return { r, broadcasts: after.nonces - before.nonces, paid };
  }

  test("unknown code at a first-time payer gets the shape's own gas ceiling: a passkey-cost check is refused gas_limit_too_high, nothing sent; with a settled payment on record, it settles", async () => {
    const wallet = privateKeyToAccount(generatePrivateKey()).address;
    await plant(wallet, walletCode);
    await fund(wallet, 10n * PRICE);
    const first = await settleCheck(wallet, PASSKEY_LIKE_BURN, "first payment, costly check");
    assert.deepEqual(
      [first.r.success, first.r.errorReason, first.broadcasts, first.paid],
      [false, "gas_limit_too_high", 0, 0n],
    );
    // A cheap check fits the shape's own ceiling: the wallet pays, and has a history.
    const cheap = await settleCheck(wallet, LIGHT_BURN, "cheap check");
    assert.deepEqual([cheap.r.success, cheap.paid], [true, PRICE], JSON.stringify(cheap.r));
    const again = await settleCheck(wallet, PASSKEY_LIKE_BURN, "known payer, costly check");
    assert.deepEqual([again.r.success, again.paid], [true, PRICE], JSON.stringify(again.r));
  });

  test("a listed wallet implementation gets the allowance from its first payment, behind an ERC-1967 proxy or an EIP-7702 delegation; the same code unlisted does not", async () => {
    const proxied = await proxyWallet(knownImplementation);
    const viaProxy = await settleCheck(proxied, PASSKEY_LIKE_BURN, "listed, ERC-1967 proxy");
    assert.deepEqual(
      [viaProxy.r.success, viaProxy.paid],
      [true, PRICE],
      JSON.stringify(viaProxy.r),
    );

    const delegated = privateKeyToAccount(generatePrivateKey()).address;
    await plant(delegated, concatHex(["0xef0100", knownImplementation]));
    await fund(delegated, 10n * PRICE);
    const via7702 = await settleCheck(delegated, PASSKEY_LIKE_BURN, "listed, EIP-7702 delegate");
    assert.deepEqual([via7702.r.success, via7702.paid], [true, PRICE], JSON.stringify(via7702.r));

    // The same code behind a proxy naming an unlisted implementation.
    const unlisted = await proxyWallet(delegate);
    const refused = await settleCheck(unlisted, PASSKEY_LIKE_BURN, "unlisted, ERC-1967 proxy");
    assert.deepEqual(
      [refused.r.success, refused.r.errorReason, refused.broadcasts],
      [false, "gas_limit_too_high", 0],
    );
  });

  test("a payer that moves its USDC away in the block of our settle: refused on every account after one failure; the merchant is not held off", async () => {
    const first = await merchantAccount("raced merchant");
    const payerKey = generatePrivateKey();
    const payer = privateKeyToAccount(payerKey);
    await client.request({
      method: "anvil_setBalance" as never,
      params: [payer.address, toHex(10n ** 18n)] as never,
    });
    await fund(payer.address, 100n * PRICE);
    const requirements = requirementsFor({
      network: NETWORK,
      usdc: stack.usdc,
      payTo: PAY_TO,
      amount: PRICE.toString(),
    });
    const before = await signersState(stack, client);
    const raced = await settleRacedBy(
      stack.rpcUrl,
      async () => first.facilitator.settle(await signPayment(payerKey, requirements), requirements),
      () =>
        createWalletClient({ account: payer, transport: http(stack.rpcUrl) }).writeContract({
          chain: null,
          address: stack.usdc,
          abi: erc20Abi,
          functionName: "transfer",
          args: [PAY_TO, 100n * PRICE],
          // No estimate: against the pending block it would see our settle first.
          gas: 100_000n,
          ...FRONT_RUN_FEES,
        }),
    );
    assert.equal(raced.success, false, JSON.stringify(raced));
    // Sent, and reverted on-chain (a failure's answer names no transaction).
    const row = await stack.service.db
      .selectFrom("settlements")
      .select(["status", "failure_cause", "transaction"])
      .where("account_id", "=", first.id)
      .executeTakeFirstOrThrow();
    assert.equal(row.status, "failed");
    assert.notEqual(row.transaction, null, "sent");
    assert.equal(row.failure_cause, "payer", "charged to the payer, not the merchant");
    // The mined transaction's signed bytes are not kept at rest.
    const journal = await stack.service.db
      .selectFrom("settlement_transactions")
      .select(["status", "detail"])
      .where("reference", "=", row.transaction!)
      .executeTakeFirstOrThrow();
    assert.equal(journal.status, "reverted");
    assert.equal("raw" in journal.detail, false, JSON.stringify(journal.detail));

    // Funded again, the payer is refused everywhere, before anything is sent,
    // and its payments do not verify either, on any account, while an
    // honest payer's still do.
    await fund(payer.address, 100n * PRICE);
    const stranger = await merchant("verifying merchant");
    for (const facilitator of [first.facilitator, stranger]) {
      const verdict = await facilitator.verify(
        await signPayment(payerKey, requirements),
        requirements,
      );
      assert.deepEqual(
        [verdict.isValid, verdict.invalidReason, verdict.payer],
        [false, "payer_failed_onchain_recently", payer.address],
        JSON.stringify(verdict),
      );
      assert.match(verdict.invalidMessage ?? "", /refused for another \d+ s/);
    }
    const honestVerdict = await stranger.verify(
      await signPayment(stack.payerKeys[1]!, requirements),
      requirements,
    );
    assert.equal(honestVerdict.isValid, true, JSON.stringify(honestVerdict));
    const answers: string[] = [];
    for (let i = 0; i < 24; i++) {
      const facilitator = i % 2 === 0 ? first.facilitator : await merchant(`other ${i}`);
      const r = await facilitator.settle(await signPayment(payerKey, requirements), requirements);
      answers.push(r.success ? "success" : `${r.errorReason}|${r.transaction}`);
    }
    const after = await signersState(stack, client);
    console.log(
      `racing EOA payer: 25 settles → ${after.nonces - before.nonces} broadcasts, our signers spent ${before.balance - after.balance} wei; answers: ${[...new Set(answers)].join(" | ")}`,
    );
    assert.deepEqual(new Set(answers), new Set(["payer_failed_onchain_recently|"]));
    assert.equal(after.nonces - before.nonces, 1, "one failed transaction, then nothing");
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payer.address), 100n * PRICE);

    // The merchant's own failure limit did not count the payer's failure,
    // and its honest customers still settle.
    const honest = await first.facilitator.settle(
      await signPayment(stack.payerKeys[1]!, requirements),
      requirements,
    );
    assert.equal(honest.success, true, JSON.stringify(honest));
  });
});
