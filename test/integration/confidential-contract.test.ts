/**
 * The confidential settlement vault on the devnet's eip155:8453, through the
 * service's module (src/chains/evm/confidential) and a merchant's wallet on
 * its own (test/chains/evm/confidentialWallet.ts): the fhEVM host contracts,
 * the mock coprocessor and KMS, real USDC authorizations collected by the
 * vault, anvil time travel.
 *
 * Each test starts on a fresh UTC day of the chain (time only moves
 * forward), so none depends on another's payments or batches. Gas of each
 * operation is recorded and printed at the end.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  concat,
  createPublicClient,
  createTestClient,
  createWalletClient,
  decodeFunctionData,
  defineChain,
  encodeAbiParameters,
  http,
  erc20Abi,
  keccak256,
  toHex,
  type Address,
  type Hex,
  type PublicClient,
  type TestClient,
} from "viem";
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { randomBytes } from "node:crypto";
import { authorizationTypes, eip3009ABI } from "@x402/evm";
import { startDevnet, type Devnet } from "../../devnet/evm/index.js";
import {
  createConfidentialVault,
  type ConfidentialReceipt,
  type ConfidentialVault,
  type DayCredit,
} from "../../src/chains/evm/confidential/vault.js";
import { confidentialVaultAbi } from "../../src/chains/evm/confidential/vaultAbi.js";
import { attributionOf } from "../../src/chains/evm/confidential/attributions.js";
import { merchantVaultAbi } from "../../src/clients/confidential/receipts.js";
import { loadArtifacts } from "../../devnet/evm/compile.js";
import { confidentialVaultAbiOf } from "../../devnet/evm/confidentialVault.js";
import { startDevnetFhevm } from "../../devnet/evm/fhevm.js";
import {
  decryptConfirmation,
  merchantWallet,
  type MerchantWallet,
} from "../chains/evm/confidentialWallet.js";

const NETWORK = "eip155:8453";
const CHAIN_ID = 8453;
const DAY = 86_400n;
const CHAIN = defineChain({
  id: CHAIN_ID,
  name: "Base (devnet)",
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [] } },
});

describe("confidential settlement vault (devnet, fhEVM mock)", () => {
  let devnet: Devnet;
  let client: PublicClient;
  let testClient: TestClient;
  let vault: ConfidentialVault;
  let usdc: Address;
  let payerKeys: Hex[];
  let cleartextDir: string;
  let cleartextFile: string;
  const gas: Record<string, bigint[]> = {};
  const record = (what: string, used: bigint) => (gas[what] ??= []).push(used);

  before(async () => {
    devnet = await startDevnet({
      networks: [NETWORK],
      blockTimeSeconds: 0,
      outFile: null,
      payers: 3,
    });
    const info = devnet.networks[NETWORK]!;
    const confidential = info.confidential!;
    client = createPublicClient({ transport: http(info.rpcUrl), pollingInterval: 50 });
    testClient = createTestClient({ transport: http(info.rpcUrl), mode: "anvil" });
    usdc = info.assets["USDC"]!;
    payerKeys = info.payerPrivateKeys;
    cleartextDir = mkdtempSync(join(tmpdir(), "confidential-"));
    cleartextFile = join(cleartextDir, "cleartexts.jsonl");
    vault = await createConfidentialVault({
      rpcUrl: info.rpcUrl,
      chainId: CHAIN_ID,
      contractAddress: confidential.contractAddress,
      operatorKey: confidential.operatorPrivateKey,
      mode: {
        mock: () => startDevnetFhevm({ rpcUrl: info.rpcUrl, chainId: CHAIN_ID, cleartextFile }),
      },
      slotsPerTransaction: 8,
    });
  });

  after(async () => {
    await vault?.close();
    await devnet?.stop();
    if (cleartextDir) rmSync(cleartextDir, { recursive: true, force: true });
    const lines = Object.entries(gas).map(([what, used]) => {
      const avg = used.reduce((a, b) => a + b, 0n) / BigInt(used.length);
      return `  ${what}: ${avg} gas (n=${used.length})`;
    });
    process.stdout.write(`confidential vault gas:\n${lines.join("\n")}\n`);
  });

  // ---- helpers ----

  const chainTime = async () => (await client.getBlock()).timestamp;
  const currentDay = async () => Number((await chainTime()) / DAY);
  /** Moves the chain to the start of the next UTC day (plus a minute). */
  const nextDay = async (): Promise<number> => {
    const now = await chainTime();
    const target = (now / DAY + 1n) * DAY + 60n;
    await testClient.setNextBlockTimestamp({ timestamp: target });
    await testClient.mine({ blocks: 1 });
    return Number(target / DAY);
  };
  const warp = async (seconds: bigint) => {
    await testClient.increaseTime({ seconds: Number(seconds) });
    await testClient.mine({ blocks: 1 });
  };
  const usdcBalance = (who: Address) =>
    client.readContract({ address: usdc, abi: eip3009ABI, functionName: "balanceOf", args: [who] });

  interface Merchant {
    account: PrivateKeyAccount;
    slot: bigint;
    secret: Hex;
    wallet: MerchantWallet;
  }
  const enable = async (): Promise<Merchant> => {
    const account = privateKeyToAccount(generatePrivateKey());
    await testClient.setBalance({ address: account.address, value: 10n ** 18n });
    const walletSignature = await account.signMessage({
      message: vault.enablementMessage(account.address, "acct_test"),
    });
    const { slot, secret, txHash } = await vault.assignSlot({
      merchant: account.address,
      accountRef: "acct_test",
      walletSignature,
      viewer: privateKeyToAccount(generatePrivateKey()).address,
    });
    if (txHash) {
      record("assignSlot", (await client.getTransactionReceipt({ hash: txHash })).gasUsed);
    }
    const wallet = merchantWallet({
      account,
      rpcUrl: devnet.networks[NETWORK]!.rpcUrl,
      chainId: CHAIN_ID,
      vault: vault.address,
      publicClient: client,
    });
    return { account, slot, secret, wallet };
  };

  interface Payment {
    payer: Address;
    nonce: Hex;
    amount: bigint;
    receipt: ConfidentialReceipt;
    txHash: Hex;
  }
  /**
   * A confidential payment: attributed to the merchant's slot, the payer's
   * USDC authorization to the vault collected with that attribution (as the
   * collecting signer sends it), then the receipt: the commitment's opening.
   */
  const pay = async (merchant: Merchant, amount: bigint, payerIndex = 0): Promise<Payment> => {
    const payer = privateKeyToAccount(payerKeys[payerIndex % payerKeys.length]!);
    const nonce = toHex(randomBytes(32));
    const now = await chainTime();
    const authorization = {
      from: payer.address,
      to: vault.address,
      value: amount,
      validAfter: 0n,
      validBefore: now + 3600n,
      nonce,
    };
    const signature = await payer.signTypedData({
      domain: { name: "USD Coin", version: "2", chainId: CHAIN_ID, verifyingContract: usdc },
      types: authorizationTypes,
      primaryType: "TransferWithAuthorization",
      message: authorization,
    });
    await vault.attribute({
      payer: payer.address,
      nonce,
      slot: merchant.slot,
      salt: merchant.secret,
    });
    const attribution = attributionOf(vault.address, vault.paymentKey(payer.address, nonce))!;
    // Anyone may submit it to the vault's collect; the service's signer pool does in production.
    const submitter = createWalletClient({
      transport: http(devnet.networks[NETWORK]!.rpcUrl),
      account: privateKeyToAccount(devnet.networks[NETWORK]!.facilitatorPrivateKeys[0]!),
      chain: CHAIN,
    });
    const txHash = await submitter.writeContract({
      address: vault.address,
      abi: confidentialVaultAbi,
      functionName: "collect",
      args: [
        payer.address,
        vault.address,
        amount,
        0n,
        authorization.validBefore,
        nonce,
        signature,
        concat([attribution.commitment, attribution.signature]),
      ],
      chain: CHAIN,
    });
    const r = await client.waitForTransactionReceipt({ hash: txHash });
    assert.equal(r.status, "success");
    record("collect", r.gasUsed);
    const receipt = await vault.receiptOf({
      payer: payer.address,
      nonce,
      slot: merchant.slot,
      salt: merchant.secret,
    });
    assert.equal(receipt.day, await currentDay());
    return { payer: payer.address, nonce, amount, receipt, txHash };
  };
  const creditsOf = (byMerchant: Map<Merchant, Payment[]>): DayCredit[] =>
    [...byMerchant].map(([m, payments]) => ({
      slot: m.slot,
      amount: payments.reduce((s, p) => s + p.amount, 0n),
    }));
  const batch = async (day: number, credits: DayCredit[]) => {
    const result = await vault.creditDay({ day, credits });
    for (const hash of result.txHashes) {
      const r = await client.getTransactionReceipt({ hash });
      const tx = await client.getTransaction({ hash });
      const call = decodeFunctionData({ abi: confidentialVaultAbi, data: tx.input });
      if (call.functionName === "creditSlots" || call.functionName === "release") {
        const slots = (call.args[1] as readonly bigint[]).length;
        record(`${call.functionName} per slot (${slots} per tx)`, r.gasUsed / BigInt(slots));
      } else {
        record(call.functionName, r.gasUsed);
      }
    }
    return result;
  };
  const withdraw = async (m: Merchant, amount: bigint) => {
    const { request, typedData } = await vault.prepareWithdraw({
      slot: m.slot,
      merchant: m.account.address,
      amount,
    });
    const signature = await m.account.signTypedData(typedData);
    const submitted = await vault.submitWithdraw({ request, secret: m.secret, signature });
    if (submitted.txHash) {
      record(
        "requestWithdraw",
        (await client.getTransactionReceipt({ hash: submitted.txHash })).gasUsed,
      );
    }
    return { ...submitted, request, signature };
  };

  // ---- tests ----

  test("a slot is assigned on-chain once per merchant, and nobody can rebind it", async () => {
    const m = await enable();
    const again = await vault.assignSlot({
      merchant: m.account.address,
      accountRef: "acct_test",
      walletSignature: await m.account.signMessage({
        message: vault.enablementMessage(m.account.address, "acct_test"),
      }),
    });
    assert.equal(again.slot, m.slot, "the same merchant and signature get the same slot");
    assert.equal(again.txHash, null);

    // The operator (the only account that may assign) can add slots but has
    // no function that changes a slot's commitment: an attacker's commitment
    // becomes a new slot, and a withdrawal from m's slot to another address fails.
    const [commitmentBefore] = await client.readContract({
      address: vault.address,
      abi: confidentialVaultAbi,
      functionName: "slotInfo",
      args: [m.slot],
    });
    const attacker = privateKeyToAccount(generatePrivateKey());
    const attackerCommitment = encodeAbiParameters(
      [{ type: "address" }, { type: "bytes32" }],
      [attacker.address, m.secret],
    );
    const operator = createWalletClient({
      transport: http(devnet.networks[NETWORK]!.rpcUrl),
      account: privateKeyToAccount(devnet.networks[NETWORK]!.confidential!.operatorPrivateKey),
      chain: CHAIN,
    });
    const { keccak256 } = await import("viem");
    const hash = await operator.writeContract({
      address: vault.address,
      abi: confidentialVaultAbi,
      functionName: "assignSlot",
      args: [keccak256(attackerCommitment), attacker.address],
      chain: CHAIN,
    });
    await client.waitForTransactionReceipt({ hash });
    const [commitmentAfter] = await client.readContract({
      address: vault.address,
      abi: confidentialVaultAbi,
      functionName: "slotInfo",
      args: [m.slot],
    });
    assert.equal(commitmentAfter, commitmentBefore);
    const abiFunctions = confidentialVaultAbi
      .filter(
        (e) =>
          e.type === "function" && e.stateMutability !== "view" && e.stateMutability !== "pure",
      )
      .map((e) => (e as { name: string }).name)
      .sort();
    assert.deepEqual(abiFunctions, [
      "assignSlot",
      "cancelWithdraw",
      "challenge",
      "closeDay",
      "collect",
      "collect",
      "creditSlots",
      "depositBond",
      "endFreeze",
      "finalizeDay",
      "finalizeWithdraw",
      "initialize",
      "redeem",
      "release",
      "requestWithdraw",
      "resolveChallenge",
      "resume",
      "returnPayments",
      "returnStray",
      "withdrawBond",
    ]);
    // initialize cannot run again (it would replace the operator or signer).
    await assert.rejects(
      operator.writeContract({
        address: vault.address,
        abi: confidentialVaultAbi,
        functionName: "initialize",
        args: [
          usdc,
          attacker.address,
          attacker.address,
          0n,
          { base: 0n, perOpening: 0n },
          attacker.address,
          attacker.address,
          { ACLAddress: usdc, CoprocessorAddress: usdc, KMSVerifierAddress: usdc },
        ],
      }),
      /AlreadyInitialized/,
    );
    // A withdrawal the attacker signs for m's slot is refused: the commitment names m.
    const { request } = await vault.prepareWithdraw({
      slot: m.slot,
      merchant: attacker.address,
      amount: 1n,
    });
    const signature = await attacker.signTypedData(vault.withdrawTypedData(request));
    await assert.rejects(
      vault.submitWithdraw({ request, secret: m.secret, signature }),
      /NotSlotOwner/,
    );
  });

  test("collect, then the daily batch credits; a second batch credits nothing; pending is not spendable", async () => {
    await nextDay();
    const a = await enable();
    const b = await enable();
    const day = await currentDay();
    const payments = new Map([
      [a, [await pay(a, 1_500_000n), await pay(a, 250_000n, 1)]],
      [b, [await pay(b, 3_000_000n, 2)]],
    ]);
    // Pending (paid, not yet batched) is not spendable: the debit moves nothing.
    const early = await withdraw(a, 1_000_000n);
    const before = await usdcBalance(a.account.address);
    const fin = await vault.finalizeWithdraw(early.withdrawalId);
    assert.equal(fin.paid, false);
    assert.equal(await usdcBalance(a.account.address), before);

    await assert.rejects(vault.creditDay({ day, credits: creditsOf(payments) }), /has not ended/);
    await nextDay();
    const first = await batch(day, creditsOf(payments));
    assert.ok(first.credited.includes(a.slot) && first.credited.includes(b.slot));
    assert.equal(first.total, 4_750_000n);
    assert.equal(await vault.balance(a.slot), 1_750_000n);
    assert.equal(await vault.balance(b.slot), 3_000_000n);

    const second = await vault.creditDay({ day, credits: creditsOf(payments) });
    assert.deepEqual(second.txHashes, []);
    assert.equal(await vault.balance(a.slot), 1_750_000n, "no second credit");

    // The day is closed on the KMS's proof that the slot credits add up to
    // what the vault collected; anyone can decrypt that check again.
    const [collected, count, , , attempt, , released, phase, flag] = await client.readContract({
      address: vault.address,
      abi: confidentialVaultAbi,
      functionName: "dayInfo",
      args: [BigInt(day)],
    });
    const slots = await client.readContract({
      address: vault.address,
      abi: confidentialVaultAbi,
      functionName: "slotCount",
    });
    assert.deepEqual(
      [collected, count, attempt, released, phase],
      [4_750_000n, 3, 0, Number(slots), 2],
    );
    assert.equal(
      await decryptConfirmation({
        rpcUrl: devnet.networks[NETWORK]!.rpcUrl,
        chainId: CHAIN_ID,
        cleartextFile,
        handle: flag,
      }),
      true,
    );
  });

  test("a batch retried after a crash mid-batch credits each slot once", async () => {
    await nextDay();
    const a = await enable();
    const day = await currentDay();
    const p = await pay(a, 700_000n);
    await nextDay();
    // The crash: the first run marked the receipt and credited a's slot, then stopped.
    const { handles, inputProof } = await (async () => {
      const { fheClient } = await import("../../src/chains/evm/confidential/fhe.js");
      const { startDevnetFhevm } = await import("../../devnet/evm/fhevm.js");
      const running = await startDevnetFhevm({
        rpcUrl: devnet.networks[NETWORK]!.rpcUrl,
        chainId: CHAIN_ID,
        cleartextFile,
      });
      try {
        return await fheClient(running.instance).encryptAmounts(vault.address, vault.operator, [
          700_000n,
        ]);
      } finally {
        running.close();
      }
    })();
    const operator = createWalletClient({
      transport: http(devnet.networks[NETWORK]!.rpcUrl),
      account: privateKeyToAccount(devnet.networks[NETWORK]!.confidential!.operatorPrivateKey),
      chain: CHAIN,
    });
    for (const call of [
      { functionName: "creditSlots", args: [BigInt(day), [a.slot], handles, inputProof] },
      // The same chunk sent twice (a retry that raced the first): skipped.
      { functionName: "creditSlots", args: [BigInt(day), [a.slot], handles, inputProof] },
    ] as const) {
      const hash = await operator.writeContract({
        address: vault.address,
        abi: confidentialVaultAbi,
        ...(call as unknown as { functionName: "closeDay"; args: [bigint] }),
      });
      assert.equal((await client.waitForTransactionReceipt({ hash })).status, "success");
    }
    assert.equal(await vault.balance(a.slot), 0n, "pending until the day is proven");
    const retry = await batch(day, creditsOf(new Map([[a, [p]]])));
    assert.ok(retry.alreadyCredited.includes(a.slot));
    assert.ok(!retry.credited.includes(a.slot));
    assert.equal(retry.total, 700_000n);
    assert.equal(await vault.balance(a.slot), 700_000n);
  });

  test("a day whose batch did not run: its receipts are redeemed once (by anyone holding them, only to its slot), and the day closes late without them", async () => {
    await nextDay();
    const m = await enable();
    const day = await currentDay();
    const batched = await pay(m, 400_000n);
    const redeemed = await pay(m, 900_000n, 1);

    // The batch does not run; a day after the day ended the merchant redeems.
    await nextDay();
    assert.equal(
      (await m.wallet.redeem(redeemed.receipt)).status,
      "reverted",
      "the batch's turn first",
    );
    await nextDay();
    const other = await enable();
    assert.equal(
      (await m.wallet.redeem({ ...redeemed.receipt, slot: other.slot.toString() })).status,
      "reverted",
      "another slot",
    );
    assert.equal(
      (await m.wallet.redeem({ ...redeemed.receipt, blinding: keccak256(other.account.address) }))
        .status,
      "reverted",
      "not its blinding",
    );
    // Anyone holding the receipt may send it; it credits the merchant's slot only.
    const r = await other.wallet.redeem(redeemed.receipt);
    assert.equal(r.status, "success");
    record("redeem", r.gasUsed);
    assert.equal(await vault.balance(m.slot), 900_000n);
    assert.equal(await vault.balance(other.slot), 0n);
    assert.equal((await m.wallet.redeem(redeemed.receipt)).status, "reverted", "second redeem");

    // Two days late, the batch closes the day: the pool no longer holds the
    // redeemed payment, so crediting it again would not add up.
    await assert.rejects(
      vault.creditDay({ day, credits: creditsOf(new Map([[m, [batched, redeemed]]])) }),
      /add up to 1300000, but the vault's pool for the day is 400000/,
    );
    await batch(day, creditsOf(new Map([[m, [batched]]])));
    assert.equal(await vault.balance(m.slot), 1_300_000n);
    assert.equal((await m.wallet.redeem(batched.receipt)).status, "reverted", "batch-credited");
    assert.equal(await vault.balance(m.slot), 1_300_000n);
  });

  test("collect takes each authorization once and only to the vault; USDC sent around it is stray, which goes only to the bond owner fixed at deployment", async () => {
    await nextDay();
    const m = await enable();
    const p = await pay(m, 123_000n);
    const info = await vault.payment(p.receipt.key);
    assert.deepEqual(
      {
        state: info.state,
        amount: info.amount,
        day: info.day,
        payer: info.payer,
        commitment: info.commitment,
      },
      {
        state: "collected",
        amount: 123_000n,
        day: await currentDay(),
        payer: p.payer,
        commitment: p.receipt.commitment,
      },
    );
    // The same authorization again: the token refuses the used nonce.
    await assert.rejects(
      client.simulateContract({
        address: vault.address,
        abi: confidentialVaultAbi,
        functionName: "collect",
        args: [
          p.payer,
          vault.address,
          p.amount,
          0n,
          (await chainTime()) + 600n,
          p.nonce,
          "0x",
          "0x",
        ],
      }),
      /AlreadyCollected/,
    );
    // An authorization to someone else cannot be collected by the vault.
    await assert.rejects(
      client.simulateContract({
        address: vault.address,
        abi: confidentialVaultAbi,
        functionName: "collect",
        args: [
          p.payer,
          usdc,
          1n,
          0n,
          (await chainTime()) + 600n,
          toHex(randomBytes(32)),
          "0x",
          "0x",
        ],
      }),
      /NotPaidToVault/,
    );

    // A plain transfer to the vault: stray, nobody's credit.
    const payer = privateKeyToAccount(payerKeys[1]!);
    const sender = createWalletClient({
      transport: http(devnet.networks[NETWORK]!.rpcUrl),
      account: payer,
      chain: CHAIN,
    });
    const stray = 55_000n;
    await client.waitForTransactionReceipt({
      hash: await sender.writeContract({
        address: usdc,
        abi: erc20Abi,
        functionName: "transfer",
        args: [vault.address, stray],
        chain: CHAIN,
      }),
    });
    const strayBalance = () =>
      client.readContract({
        address: vault.address,
        abi: confidentialVaultAbi,
        functionName: "strayBalance",
      });
    assert.equal(await strayBalance(), stray);
    const operator = createWalletClient({
      transport: http(devnet.networks[NETWORK]!.rpcUrl),
      account: privateKeyToAccount(devnet.networks[NETWORK]!.confidential!.operatorPrivateKey),
      chain: CHAIN,
    });
    // Stray USDC goes to the bond owner, fixed at deployment: no caller names
    // where it goes (the vault cannot tell who sent it), and more than the
    // stray amount is refused: collected money is nobody's to move.
    const bondOwner = privateKeyToAccount(
      devnet.networks[NETWORK]!.confidential!.bondOwnerPrivateKey,
    ).address;
    const returnFn = confidentialVaultAbi.find(
      (e) => e.type === "function" && e.name === "returnStray",
    ) as { inputs: readonly { type: string }[] };
    assert.deepEqual(
      returnFn.inputs.map((i) => i.type),
      ["uint256"],
      "the operator names no recipient",
    );
    await assert.rejects(
      operator.writeContract({
        address: vault.address,
        abi: confidentialVaultAbi,
        functionName: "returnStray",
        args: [stray + 1n],
      }),
      /NotStray/,
    );
    const [payerBefore, ownerBefore] = await Promise.all([
      usdcBalance(payer.address),
      usdcBalance(bondOwner),
    ]);
    await client.waitForTransactionReceipt({
      hash: await operator.writeContract({
        address: vault.address,
        abi: confidentialVaultAbi,
        functionName: "returnStray",
        args: [stray],
      }),
    });
    assert.equal(await usdcBalance(bondOwner), ownerBefore + stray);
    assert.equal(await usdcBalance(payer.address), payerBefore);
    assert.equal(await strayBalance(), 0n);
  });

  test("withdrawals: within balance the USDC arrives; above it nothing moves; stalled ones are cancelled after 24 h", async () => {
    await nextDay();
    const m = await enable();
    const day = await currentDay();
    const payments = [await pay(m, 2_000_000n), await pay(m, 500_000n, 2)];
    await nextDay();
    await batch(day, creditsOf(new Map([[m, payments]])));

    // Within balance.
    const w1 = await withdraw(m, 1_200_000n);
    const info = await vault.withdrawal(w1.withdrawalId);
    assert.equal(info.state, "debited");
    // The wallet decrypts the confirmation on its own.
    assert.equal(
      await decryptConfirmation({
        rpcUrl: devnet.networks[NETWORK]!.rpcUrl,
        chainId: CHAIN_ID,
        cleartextFile,
        handle: info.debitedHandle,
      }),
      true,
    );
    const before = await usdcBalance(m.account.address);
    const vaultBefore = await usdcBalance(vault.address);
    const fin = await vault.finalizeWithdraw(w1.withdrawalId);
    assert.equal(fin.paid, true);
    record("finalizeWithdraw", (await client.getTransactionReceipt({ hash: fin.txHash! })).gasUsed);
    assert.equal(await usdcBalance(m.account.address), before + 1_200_000n);
    assert.equal(await usdcBalance(vault.address), vaultBefore - 1_200_000n);
    assert.equal(await vault.balance(m.slot), 1_300_000n);
    // Idempotent: finalizing again moves nothing and reports the same outcome.
    const again = await vault.finalizeWithdraw(w1.withdrawalId);
    assert.equal(again.txHash, null);
    assert.equal(again.paid, true);
    assert.equal(await usdcBalance(m.account.address), before + 1_200_000n);
    // Resubmitting the same signed request returns the same withdrawal.
    const resubmitted = await vault.submitWithdraw({
      request: w1.request,
      secret: m.secret,
      signature: w1.signature,
    });
    assert.equal(resubmitted.withdrawalId, w1.withdrawalId);
    assert.equal(resubmitted.txHash, null);

    // Above balance: the oblivious debit takes nothing, and nothing moves.
    const w2 = await withdraw(m, 5_000_000n);
    const fin2 = await vault.finalizeWithdraw(w2.withdrawalId);
    assert.equal(fin2.paid, false);
    assert.equal(await usdcBalance(m.account.address), before + 1_200_000n);
    assert.equal(await vault.balance(m.slot), 1_300_000n);

    // Stalled: not finalized; the merchant cancels after 24 hours, the debit is undone.
    const w3 = await withdraw(m, 300_000n);
    assert.equal(await vault.balance(m.slot), 1_000_000n);
    assert.equal((await m.wallet.cancelWithdraw(w3.withdrawalId)).status, "reverted", "too early");
    await warp(DAY);
    const stranger = merchantWallet({
      account: privateKeyToAccount(generatePrivateKey()),
      rpcUrl: devnet.networks[NETWORK]!.rpcUrl,
      chainId: CHAIN_ID,
      vault: vault.address,
      publicClient: client,
    });
    await testClient.setBalance({ address: stranger.account.address, value: 10n ** 18n });
    assert.equal(
      (await stranger.cancelWithdraw(w3.withdrawalId)).status,
      "reverted",
      "not the owner",
    );
    const cancelled = await m.wallet.cancelWithdraw(w3.withdrawalId);
    assert.equal(cancelled.status, "success");
    record("cancelWithdraw", cancelled.gasUsed);
    assert.equal((await vault.withdrawal(w3.withdrawalId)).state, "cancelled");
    assert.equal(await vault.balance(m.slot), 1_300_000n);
    const fin3 = await vault.finalizeWithdraw(w3.withdrawalId);
    assert.equal(fin3.state, "cancelled");
    assert.equal(fin3.paid, false);
    assert.equal(await usdcBalance(m.account.address), before + 1_200_000n);
  });

  test("visibility: no merchant address, per-merchant sum or count on-chain before withdrawal; payers, amounts, timing and withdrawals are", async () => {
    await nextDay();
    const merchants = [await enable(), await enable(), await enable()];
    const day = await currentDay();
    // Counts no array, storage slot, slot id or day would equal (the vault's
    // storage variables take slots 0 to 33); amounts whose sums no single payment equals.
    const counts = [41, 43, 45];
    const payments = new Map<Merchant, Payment[]>();
    let seed = 1;
    for (const [i, m] of merchants.entries()) {
      const list: Payment[] = [];
      for (let k = 0; k < counts[i]!; k++) {
        seed = (seed * 48271) % 2147483647;
        list.push(await pay(m, 10_000n + BigInt(seed % 90_000), k));
      }
      payments.set(m, list);
    }
    await nextDay();
    await batch(day, creditsOf(payments));
    for (const m of merchants) {
      const sum = payments.get(m)!.reduce((s, p) => s + p.amount, 0n);
      assert.equal(await vault.balance(m.slot), sum);
    }

    const chain = await scanChain(client);
    const word = (n: bigint) => n.toString(16).padStart(64, "0");
    for (const [i, m] of merchants.entries()) {
      const address = m.account.address.slice(2).toLowerCase();
      const sum = payments.get(m)!.reduce((s, p) => s + p.amount, 0n);
      assert.ok(!chain.text.includes(address), `merchant ${i}'s address is on-chain`);
      assert.ok(!chain.words.has(word(sum)), `merchant ${i}'s sum ${sum} is on-chain`);
      assert.ok(!chain.words.has(word(BigInt(counts[i]!))), `merchant ${i}'s count is on-chain`);
    }
    // Visible: payers and each amount (the USDC transfers), and their blocks.
    for (const p of [...payments.values()].flat()) {
      assert.ok(chain.text.includes(p.payer.slice(2).toLowerCase()));
      assert.ok(chain.words.has(word(p.amount)));
    }

    // A withdrawal names its merchant, as it must.
    const w = await withdraw(merchants[0]!, 1n);
    await vault.finalizeWithdraw(w.withdrawalId);
    const afterWithdrawal = await scanChain(client);
    assert.ok(afterWithdrawal.text.includes(merchants[0]!.account.address.slice(2).toLowerCase()));
  });

  test("a deployment initializes the vault in its own transaction: nobody can initialize it first", async () => {
    const { deployConfidentialVault } = await import("../../devnet/evm/deployConfidentialVault.js");
    const { FHEVM_HOST } = await import("../../devnet/evm/fhevm.js");
    const info = devnet.networks[NETWORK]!;
    const operator = privateKeyToAccount(generatePrivateKey()).address;
    const deployment = {
      rpcUrl: info.rpcUrl,
      chainId: CHAIN_ID,
      deployerKey: info.facilitatorPrivateKeys[1]!,
      asset: usdc,
      operator,
      bondOwner: privateKeyToAccount(generatePrivateKey()).address,
      challengeWindowSeconds: 172_800,
      coprocessor: {
        acl: FHEVM_HOST.acl,
        executor: FHEVM_HOST.executor,
        kmsVerifier: FHEVM_HOST.kmsVerifier,
      },
    };
    // A chain without the fhEVM at the given addresses is refused before anything is sent.
    await assert.rejects(
      deployConfidentialVault({
        ...deployment,
        coprocessor: {
          ...deployment.coprocessor,
          acl: privateKeyToAccount(generatePrivateKey()).address,
        },
      }),
      /no contract at .* \(acl\)/,
    );
    const deployed = await deployConfidentialVault(deployment);
    const receipt = await client.getTransactionReceipt({ hash: deployed.transaction });
    const read = (functionName: "operator" | "deploymentBlock") =>
      client.readContract({ address: deployed.address, abi: confidentialVaultAbi, functionName });
    assert.equal(await read("operator"), operator);
    // Its reads come from the lens deployed with it, at the vault's address.
    assert.equal(
      await client.readContract({
        address: deployed.address,
        abi: confidentialVaultAbi,
        functionName: "lens",
      }),
      deployed.lens,
    );
    // Its challenges and bond run the court deployed with it, also at the vault's address.
    assert.equal(
      await client.readContract({
        address: deployed.address,
        abi: confidentialVaultAbi,
        functionName: "court",
      }),
      deployed.court,
    );
    assert.equal(
      await client.readContract({
        address: deployed.address,
        abi: confidentialVaultAbi,
        functionName: "bond",
      }),
      0n,
    );
    // Each part as placed on the chain leaves at least 1 KB under EIP-170.
    for (const [part, at] of Object.entries({
      vault: deployed.address,
      court: deployed.court,
      lens: deployed.lens,
    })) {
      const code = await client.getCode({ address: at });
      const size = ((code?.length ?? 2) - 2) / 2;
      assert.ok(size > 0 && size <= 24_576 - 1024, `the deployed ${part} is ${size} bytes`);
    }
    assert.deepEqual(
      (
        await client.readContract({
          address: deployed.address,
          abi: confidentialVaultAbi,
          functionName: "dayInfo",
          args: [1n],
        })
      ).slice(0, 2),
      [0n, 0],
    );
    assert.equal(
      await read("deploymentBlock"),
      receipt.blockNumber,
      "initialized in that transaction",
    );
    await assert.rejects(
      client.simulateContract({
        address: deployed.address,
        abi: confidentialVaultAbi,
        functionName: "initialize",
        args: [
          usdc,
          privateKeyToAccount(generatePrivateKey()).address,
          privateKeyToAccount(generatePrivateKey()).address,
          0n,
          { base: 0n, perOpening: 0n },
          deployed.lens,
          deployed.court,
          { ACLAddress: usdc, CoprocessorAddress: usdc, KMSVerifierAddress: usdc },
        ],
      }),
      /AlreadyInitialized/,
    );
    // The contract itself holds the window's floor and ceiling, whoever deploys it.
    const { bytecode, abi } = (await loadArtifacts())["ConfidentialSettlementVault"]!;
    const deployer = createWalletClient({
      transport: http(info.rpcUrl),
      account: privateKeyToAccount(info.facilitatorPrivateKeys[1]!),
      chain: CHAIN,
    });
    // And the challenge bounty's floor: 0.01 USDC per proof, 0.001 per opening.
    const bountyOf = async (functionName: "challengeBountyBase" | "challengeBountyPerOpening") =>
      client.readContract({ address: deployed.address, abi: confidentialVaultAbi, functionName });
    assert.equal(await bountyOf("challengeBountyBase"), 100_000n, "the default: 0.10 USDC");
    assert.equal(await bountyOf("challengeBountyPerOpening"), 5_000n, "the default: 0.005 USDC");
    const fine = { base: 10_000n, perOpening: 1_000n };
    for (const [window, bounty] of [
      [0n, fine],
      [86_399n, fine],
      [30n * 86_400n + 1n, fine],
      [86_400n, { base: 9_999n, perOpening: 1_000n }],
      [86_400n, { base: 10_000n, perOpening: 999n }],
    ] as const) {
      const hash = await deployer.deployContract({
        abi,
        bytecode,
        args: [
          usdc,
          operator,
          deployment.bondOwner,
          window,
          bounty,
          deployed.lens,
          deployed.court,
          {
            ACLAddress: deployment.coprocessor.acl,
            CoprocessorAddress: deployment.coprocessor.executor,
            KMSVerifierAddress: deployment.coprocessor.kmsVerifier,
          },
        ],
        gas: 10_000_000n,
      });
      const r = await client.waitForTransactionReceipt({ hash });
      assert.equal(
        r.status,
        "reverted",
        `a window of ${window} s and a bounty of ${bounty.base} + ${bounty.perOpening} were taken`,
      );
    }
    await assert.rejects(
      deployConfidentialVault({ ...deployment, challengeBounty: { base: 0n, perOpening: 0n } }),
      /challenge bounty must be at least/,
    );
    await assert.rejects(
      deployConfidentialVault({ ...deployment, challengeWindowSeconds: 3_600 }),
      /a day to 30 days/,
    );
  });

  test("room to grow: every confidential contract's runtime is at least 1 KB under EIP-170, and the compiler and OpenZeppelin are pinned", async () => {
    const artifacts = await loadArtifacts();
    const EIP170 = 24_576;
    const sizes = Object.fromEntries(
      ["ConfidentialSettlementVault", "ConfidentialVaultCourt", "ConfidentialVaultLens"].map(
        (name) => [name, (artifacts[name]!.deployedBytecode.length - 2) / 2],
      ),
    );
    process.stdout.write(`confidential contract sizes: ${JSON.stringify(sizes)}\n`);
    for (const [name, size] of Object.entries(sizes)) {
      assert.ok(size <= EIP170 - 1024, `${name} is ${size} bytes: less than 1 KB under EIP-170`);
    }
    const { readFileSync } = await import("node:fs");
    const pkg = JSON.parse(readFileSync("package.json", "utf8")) as {
      devDependencies: Record<string, string>;
    };
    for (const name of [
      "solc",
      "@openzeppelin/contracts",
      "@openzeppelin/confidential-contracts",
      "@fhevm/solidity",
    ]) {
      assert.match(pkg.devDependencies[name] ?? "", /^\d+\.\d+\.\d+$/, `${name} is not pinned`);
    }
  });

  test("production mode refuses to start on a chain without the fhEVM at the configured addresses", async () => {
    const info = devnet.networks[NETWORK]!;
    const nowhere = privateKeyToAccount(generatePrivateKey()).address;
    await assert.rejects(
      createConfidentialVault({
        rpcUrl: info.rpcUrl,
        chainId: CHAIN_ID,
        contractAddress: vault.address,
        operatorKey: info.confidential!.operatorPrivateKey,
        mode: {
          relayerUrl: "https://relayer.example",
          relayerApiKey: "key",
          aclAddress: nowhere,
          executorAddress: nowhere,
          kmsVerifierAddress: nowhere,
          inputVerifierAddress: nowhere,
          decryptionAddress: nowhere,
          inputVerificationAddress: nowhere,
          gatewayChainId: 1,
        },
      }),
      /cannot start: there is no fhEVM ACL contract at/,
    );
  });

  test("the module's ABI is the compiled contract's, and the merchant tools' fragments are in it", async () => {
    const artifacts = await loadArtifacts();
    const compiled = confidentialVaultAbiOf(artifacts);
    assert.deepEqual(JSON.parse(JSON.stringify(confidentialVaultAbi)), compiled);
    const shape = (e: {
      name?: string;
      inputs?: readonly unknown[];
      outputs?: readonly unknown[];
    }) =>
      JSON.stringify({
        name: e.name,
        inputs: (e.inputs ?? []).map((i) => (i as { type: string }).type),
        outputs: (e.outputs ?? []).map((i) => (i as { type: string }).type),
      });
    const known = new Set(compiled.map((e) => shape(e as never)));
    for (const fragment of merchantVaultAbi) {
      assert.ok(known.has(shape(fragment)), `${fragment.name} differs from the contract's`);
    }
  });
});

/**
 * Everything the chain shows: every transaction's calldata, every log's
 * topics and data, and every storage slot written (keys and values, from
 * anvil's prestate tracer in diff mode). `text` is all of it as one hex
 * string; `words` holds each 32-byte word at its ABI position.
 */
async function scanChain(client: PublicClient): Promise<{ text: string; words: Set<string> }> {
  const latest = await client.getBlockNumber();
  const parts: string[] = [];
  const words = new Set<string>();
  const addWords = (hex: string, offset: number) => {
    for (let i = offset; i + 64 <= hex.length; i += 64) words.add(hex.slice(i, i + 64));
  };
  for (let n = 0n; n <= latest; n++) {
    const block = await client.getBlock({ blockNumber: n, includeTransactions: true });
    for (const tx of block.transactions) {
      const input = tx.input.slice(2).toLowerCase();
      parts.push(input);
      addWords(input, 8);
      const receipt = await client.getTransactionReceipt({ hash: tx.hash });
      for (const log of receipt.logs) {
        for (const t of log.topics) {
          parts.push(t.slice(2));
          words.add(t.slice(2).toLowerCase());
        }
        const data = log.data.slice(2).toLowerCase();
        parts.push(data);
        addWords(data, 0);
      }
      const trace = (await client.request({
        method: "debug_traceTransaction" as never,
        params: [tx.hash, { tracer: "prestateTracer", tracerConfig: { diffMode: true } }] as never,
      })) as { post?: Record<string, { storage?: Record<string, string> }> };
      for (const account of Object.values(trace.post ?? {})) {
        for (const [key, value] of Object.entries(account.storage ?? {})) {
          const k = key.slice(2).toLowerCase().padStart(64, "0");
          const v = value.slice(2).toLowerCase().padStart(64, "0");
          parts.push(k, v);
          words.add(k);
          words.add(v);
        }
      }
    }
  }
  return { text: parts.join("|"), words };
}
