/**
 * What the vault's keys can take (issue 37), against the real contract on
 * the devnet's eip155:8453 with the fhEVM mock, driven by raw transactions
 * signed with those keys: nothing of the service stands in between.
 *
 * - The operator key mints: it creates a slot of its own, credits it the
 *   vault's USDC (alone, or with a second credit of 2^64 - V so that a
 *   64-bit sum of the day's credits wraps around to the honest total), and
 *   withdraws. The vault must pay nothing.
 * - The operator key spends a credit before its day is proven.
 * - The receipt-signer key with a merchant account of its own: forged
 *   receipts (an inflated amount, a payment the vault never collected, a
 *   payment of a day the batch already closed) must all be refused.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import {
  createPublicClient,
  createTestClient,
  createWalletClient,
  defineChain,
  encodeAbiParameters,
  http,
  keccak256,
  toHex,
  type Abi,
  type Address,
  type Hex,
  type PrivateKeyAccount,
  type PublicClient,
  type TestClient,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { authorizationTypes, eip3009ABI } from "@x402/evm";
import { startDevnet, type Devnet } from "../../devnet/index.js";
import { loadArtifacts } from "../../devnet/compile.js";
import { startDevnetFhevm, type DevnetFhevm } from "../../devnet/fhevm.js";
import { fheClient, type FheClient } from "../../src/chains/evm/confidential/fhe.js";

const NETWORK = "eip155:8453";
const CHAIN_ID = 8453;
const DAY = 86_400n;
const CHAIN = defineChain({
  id: CHAIN_ID,
  name: "Base (devnet)",
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [] } },
});

describe("what the vault's keys can take (devnet, fhEVM mock)", () => {
  let devnet: Devnet;
  let client: PublicClient;
  let testClient: TestClient;
  let abi: Abi;
  let vault: Address;
  let usdc: Address;
  let rpcUrl: string;
  let operator: PrivateKeyAccount;
  let receiptSigner: PrivateKeyAccount;
  let payerKeys: Hex[];
  let fhevm: DevnetFhevm;
  let fhe: FheClient;
  let dir: string;

  before(async () => {
    devnet = await startDevnet({ networks: [NETWORK], blockTimeSeconds: 0, outFile: null });
    const info = devnet.networks[NETWORK]!;
    rpcUrl = info.rpcUrl;
    client = createPublicClient({ transport: http(rpcUrl), pollingInterval: 50 });
    testClient = createTestClient({ transport: http(rpcUrl), mode: "anvil" });
    abi = (await loadArtifacts())["ConfidentialSettlementVault"]!.abi;
    vault = info.confidential!.contractAddress;
    usdc = info.assets["USDC"]!;
    operator = privateKeyToAccount(info.confidential!.operatorPrivateKey);
    receiptSigner = privateKeyToAccount(info.confidential!.receiptSignerPrivateKey);
    payerKeys = info.payerPrivateKeys;
    dir = mkdtempSync(join(tmpdir(), "vault-attacks-"));
    fhevm = await startDevnetFhevm({
      rpcUrl,
      chainId: CHAIN_ID,
      cleartextFile: join(dir, "cleartexts.jsonl"),
    });
    fhe = fheClient(fhevm.instance);
  });

  after(async () => {
    fhevm?.close();
    await devnet?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  // ---- raw access, the way a key holder would ----

  const has = (name: string) =>
    abi.some((e) => e.type === "function" && (e as { name: string }).name === name);
  const read = <T>(functionName: string, args: unknown[] = []) =>
    client.readContract({ address: vault, abi, functionName, args }) as Promise<T>;
  /** Sends a vault call as `account`; resolves to the receipt (reverts are mined, not thrown). */
  const send = async (account: PrivateKeyAccount, functionName: string, args: unknown[]) => {
    const wallet = createWalletClient({ transport: http(rpcUrl), account, chain: CHAIN });
    const hash = await wallet.writeContract({
      address: vault,
      abi,
      functionName,
      args,
      gas: 8_000_000n,
      chain: CHAIN,
    });
    return client.waitForTransactionReceipt({ hash });
  };
  const chainTime = async () => (await client.getBlock()).timestamp;
  const nextDay = async (): Promise<number> => {
    const target = ((await chainTime()) / DAY + 1n) * DAY + 60n;
    await testClient.setNextBlockTimestamp({ timestamp: target });
    await testClient.mine({ blocks: 1 });
    return Number(target / DAY);
  };
  const usdcOf = (who: Address) =>
    client.readContract({ address: usdc, abi: eip3009ABI, functionName: "balanceOf", args: [who] });

  /** A slot the operator creates for an address of its own, with a salt it knows. */
  const ownSlot = async (owner: PrivateKeyAccount) => {
    const salt = toHex(randomBytes(32));
    const commitment = keccak256(
      encodeAbiParameters([{ type: "address" }, { type: "bytes32" }], [owner.address, salt]),
    );
    assert.equal((await send(operator, "assignSlot", [commitment])).status, "success");
    const [, slot] = await read<[boolean, bigint]>("slotOf", [commitment]);
    await testClient.setBalance({ address: owner.address, value: 10n ** 18n });
    return { owner, salt, slot };
  };

  /** A payer's authorization to the vault, collected as the service collects it. */
  const pay = async (amount: bigint, payerIndex = 0) => {
    const payer = privateKeyToAccount(payerKeys[payerIndex]!);
    const nonce = toHex(randomBytes(32));
    const validBefore = (await chainTime()) + 3600n;
    const signature = await payer.signTypedData({
      domain: { name: "USD Coin", version: "2", chainId: CHAIN_ID, verifyingContract: usdc },
      types: authorizationTypes,
      primaryType: "TransferWithAuthorization",
      message: {
        from: payer.address,
        to: vault,
        value: amount,
        validAfter: 0n,
        validBefore,
        nonce,
      },
    });
    const args = [payer.address, vault, amount, 0n, validBefore, nonce, signature];
    const submitter = privateKeyToAccount(devnet.networks[NETWORK]!.facilitatorPrivateKeys[0]!);
    if (has("collect")) {
      assert.equal((await send(submitter, "collect", args)).status, "success");
    } else {
      const wallet = createWalletClient({
        transport: http(rpcUrl),
        account: submitter,
        chain: CHAIN,
      });
      const hash = await wallet.writeContract({
        address: usdc,
        abi: eip3009ABI,
        functionName: "transferWithAuthorization",
        args: args as never,
        chain: CHAIN,
      });
      assert.equal((await client.waitForTransactionReceipt({ hash })).status, "success");
    }
    return { payer: payer.address, nonce, amount };
  };

  /** The operator's credits for `day`, as it chooses them. */
  const credit = async (day: number, credits: [bigint, bigint][]) => {
    const { handles, inputProof } = await fhe.encryptAmounts(
      vault,
      operator.address,
      credits.map(([, amount]) => amount),
    );
    const slots = credits.map(([slot]) => slot);
    return send(operator, "creditSlots", [BigInt(day), slots, handles, inputProof]);
  };
  /** Every slot not in `credits` gets an encrypted zero, as a batch must write every slot. */
  const creditAll = async (day: number, credits: Map<bigint, bigint>) => {
    const count = await read<bigint>("slotCount");
    const all: [bigint, bigint][] = [];
    for (let s = 0n; s < count; s++) all.push([s, credits.get(s) ?? 0n]);
    for (let i = 0; i < all.length; i += 8) {
      assert.equal((await credit(day, all.slice(i, i + 8))).status, "success");
    }
  };
  /** Closes the day as far as the keys can: close, then the KMS's verdict when the vault asks for one. */
  const close = async (day: number) => {
    const closed = await send(operator, "closeDay", [BigInt(day)]);
    if (!has("finalizeDay")) return closed.status;
    if (closed.status !== "success") return closed.status;
    const info = await read<unknown[]>("dayInfo", [BigInt(day)]);
    const matches = info.at(-1) as Hex;
    const { cleartexts, proof } = await fhe.publicDecrypt([matches]);
    return (await send(operator, "finalizeDay", [BigInt(day), cleartexts, proof])).status;
  };
  const balanceOf = async (slot: bigint): Promise<bigint> => {
    const [, handle] = await read<[Hex, Hex]>("slotInfo", [slot]);
    if (BigInt(handle) === 0n) return 0n;
    const [value] = await fhe.userDecrypt(vault, [handle], operator);
    return value ?? 0n;
  };
  /** The slot owner withdraws `amount`: request, then finalize with the KMS's decryption. */
  const withdraw = async (s: Awaited<ReturnType<typeof ownSlot>>, amount: bigint) => {
    const [, , nonce] = await read<[Hex, Hex, bigint]>("slotInfo", [s.slot]);
    const request = {
      slot: s.slot,
      to: s.owner.address,
      amount,
      nonce,
      deadline: (await chainTime()) + 3600n,
    };
    const signature = await s.owner.signTypedData({
      domain: {
        name: "x402 Confidential Settlement",
        version: "1",
        chainId: CHAIN_ID,
        verifyingContract: vault,
      },
      types: {
        Withdraw: [
          { name: "slot", type: "uint256" },
          { name: "to", type: "address" },
          { name: "amount", type: "uint64" },
          { name: "nonce", type: "uint64" },
          { name: "deadline", type: "uint64" },
        ],
      },
      primaryType: "Withdraw",
      message: request,
    });
    assert.equal(
      (await send(s.owner, "requestWithdraw", [request, s.salt, signature])).status,
      "success",
    );
    const id = (await read<bigint>("withdrawalCount")) - 1n;
    const w = await read<unknown[]>("withdrawal", [id]);
    const debited = w.at(-1) as Hex;
    const { cleartexts, proof } = await fhe.publicDecrypt([debited]);
    assert.equal(
      (await send(s.owner, "finalizeWithdraw", [id, cleartexts, proof])).status,
      "success",
    );
  };

  const mint = async (wrapAround: boolean) => {
    await nextDay();
    const honest = await ownSlot(privateKeyToAccount(generatePrivateKey()));
    const thief = await ownSlot(privateKeyToAccount(generatePrivateKey()));
    const accomplice = await ownSlot(privateKeyToAccount(generatePrivateKey()));
    const day = Number((await chainTime()) / DAY);
    await pay(1_000_000n, 0);
    await pay(2_000_000n, 1);
    await nextDay();
    const held = await usdcOf(vault);
    // The honest merchant gets its 3 USDC; the thief the vault's whole
    // balance; with the wraparound, the accomplice 2^64 - held, so a 64-bit
    // sum of the credits comes back to exactly the day's 3 USDC.
    const credits = new Map<bigint, bigint>([
      [honest.slot, 3_000_000n],
      [thief.slot, held],
    ]);
    if (wrapAround) credits.set(accomplice.slot, 2n ** 64n - held);
    await creditAll(day, credits);
    await close(day);
    const thiefBefore = await usdcOf(thief.owner.address);
    await withdraw(thief, held);
    return { thiefGot: (await usdcOf(thief.owner.address)) - thiefBefore, held, thief, day };
  };
  /** The KMS proved the credits wrong: the day reopened for a new attempt, nothing released. */
  const rejected = async (day: number) => {
    if (!has("finalizeDay")) return;
    const [, , , , attempt, , released, phase] = await read<number[]>("dayInfo", [BigInt(day)]);
    assert.deepEqual({ attempt, released, phase }, { attempt: 1, released: 0, phase: 0 });
  };

  test("the operator key mints a slot the vault's balance and withdraws it: the vault pays nothing", async () => {
    const { thiefGot, held, thief, day } = await mint(false);
    assert.equal(thiefGot, 0n, "the thief was paid");
    await rejected(day);
    assert.equal(await usdcOf(vault), held, "the vault's USDC is intact");
    assert.equal(await balanceOf(thief.slot), 0n);
  });

  test("the operator key mints with a credit that wraps the day's sum around: the vault pays nothing", async () => {
    const { thiefGot, held, thief, day } = await mint(true);
    assert.equal(thiefGot, 0n, "the thief was paid");
    await rejected(day);
    assert.equal(await usdcOf(vault), held, "the vault's USDC is intact");
    assert.equal(await balanceOf(thief.slot), 0n);
  });

  test("the operator key spends a credit before its day is proven: nothing moves", async () => {
    await nextDay();
    const thief = await ownSlot(privateKeyToAccount(generatePrivateKey()));
    const day = Number((await chainTime()) / DAY);
    const paid = await pay(500_000n, 2);
    await nextDay();
    // The honest split, even: the credit is the day's whole pool, to the thief.
    await creditAll(day, new Map([[thief.slot, paid.amount]]));
    const before = await usdcOf(thief.owner.address);
    await withdraw(thief, paid.amount);
    assert.equal(await usdcOf(thief.owner.address), before, "pending credit was spent");
  });

  test("the receipt-signer key with a merchant account forges receipts: every one is refused", async () => {
    await nextDay();
    const merchant = await ownSlot(privateKeyToAccount(generatePrivateKey()));
    const day = Number((await chainTime()) / DAY);
    const real = await pay(700_000n, 3);
    await nextDay();
    await nextDay(); // past the redemption delay, the day still open
    const receipt = (r: { payer: Address; nonce: Hex; amount: bigint; day: number }) => ({
      payer: r.payer,
      nonce: r.nonce,
      merchant: merchant.owner.address,
      slot: merchant.slot,
      amount: r.amount,
      day: r.day,
    });
    const sign = (r: ReturnType<typeof receipt>) =>
      receiptSigner.signTypedData({
        domain: {
          name: "x402 Confidential Settlement",
          version: "1",
          chainId: CHAIN_ID,
          verifyingContract: vault,
        },
        types: {
          Receipt: [
            { name: "payer", type: "address" },
            { name: "nonce", type: "bytes32" },
            { name: "merchant", type: "address" },
            { name: "slot", type: "uint256" },
            { name: "amount", type: "uint64" },
            { name: "day", type: "uint32" },
          ],
        },
        primaryType: "Receipt",
        message: r,
      });
    // The collecting vault also asks for the slot's salt (only its merchant redeems).
    const withSalt =
      (
        abi.find((e) => e.type === "function" && e.name === "redeemReceipt") as unknown as {
          inputs: unknown[];
        }
      ).inputs.length === 3;
    const redeem = async (r: ReturnType<typeof receipt>) =>
      (
        await send(merchant.owner, "redeemReceipt", [
          r,
          await sign(r),
          ...(withSalt ? [merchant.salt] : []),
        ])
      ).status;

    // An inflated amount for a payment the vault did collect.
    assert.equal(await redeem(receipt({ ...real, amount: 700_000_000n, day })), "reverted");
    // Another day than the one the vault collected it in.
    assert.equal(await redeem(receipt({ ...real, day: day + 1 })), "reverted");
    // A payment the vault never collected (a nonce the payer used nowhere).
    assert.equal(
      await redeem(receipt({ payer: real.payer, nonce: toHex(randomBytes(32)), amount: 1n, day })),
      "reverted",
    );
    assert.equal(await balanceOf(merchant.slot), 0n);
    // The true receipt, once; then the batch of its day cannot count it again.
    assert.equal(await redeem(receipt({ ...real, day })), "success");
    assert.equal(await redeem(receipt({ ...real, day })), "reverted", "redeemed twice");
    assert.equal(await balanceOf(merchant.slot), 700_000n);

    // A payment of a day the batch closed: refused.
    const closedDay = Number((await chainTime()) / DAY);
    const batched = await pay(300_000n, 3);
    await nextDay();
    await creditAll(closedDay, new Map([[merchant.slot, batched.amount]]));
    assert.equal(await close(closedDay), "success");
    await nextDay();
    await nextDay();
    assert.equal(
      await redeem(receipt({ ...batched, day: closedDay })),
      "reverted",
      "a receipt of a closed day",
    );
  });
});
