/**
 * A receipt the operator must honour (issue 50), against the real vault on
 * the devnet's eip155:8453 with the fhEVM mock, driven by raw transactions
 * signed with the keys themselves (the operator's, the merchants' wallets,
 * the bond owner's): nothing of the service stands in between.
 *
 * - The operator key credits a day's whole pool to a slot of its own and
 *   gets the day proven and closed: the merchant challenges with its
 *   receipts inside the window and is paid them in full from the bond; the
 *   thief's slot gets nothing; no day closes until the bond owner resumes.
 * - An honest day: a challenge with true receipts moves nothing and costs
 *   the challenger only its gas.
 * - Forged, reused, other-merchant, mismatched and late receipts: refused.
 * - A bond below what a day collected: the day cannot close.
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
import { receiptTypes, vaultDomain } from "../../src/chains/evm/confidential/messages.js";

const NETWORK = "eip155:8453";
const CHAIN_ID = 8453;
const DAY = 86_400n;
/** Two days, as a production deployment defaults to. */
const WINDOW = 2n * DAY;
const CHAIN = defineChain({
  id: CHAIN_ID,
  name: "Base (devnet)",
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [] } },
});

interface Merchant {
  owner: PrivateKeyAccount;
  salt: Hex;
  slot: bigint;
}
interface Paid {
  payer: Address;
  nonce: Hex;
  amount: bigint;
}
interface Receipt {
  payer: Address;
  nonce: Hex;
  merchant: Address;
  slot: bigint;
  amount: bigint;
  day: number;
}

describe("a receipt the operator must honour (devnet, fhEVM mock)", () => {
  let devnet: Devnet;
  let client: PublicClient;
  let testClient: TestClient;
  let abi: Abi;
  let vault: Address;
  let usdc: Address;
  let rpcUrl: string;
  let operator: PrivateKeyAccount;
  let receiptSigner: PrivateKeyAccount;
  let bondOwner: PrivateKeyAccount;
  let payerKeys: Hex[];
  let fhevm: DevnetFhevm;
  let fhe: FheClient;
  let dir: string;

  before(async () => {
    devnet = await startDevnet({
      networks: [NETWORK],
      blockTimeSeconds: 0,
      outFile: null,
      confidentialChallengeWindowSeconds: Number(WINDOW),
    });
    const info = devnet.networks[NETWORK]!;
    rpcUrl = info.rpcUrl;
    client = createPublicClient({ transport: http(rpcUrl), pollingInterval: 50 });
    testClient = createTestClient({ transport: http(rpcUrl), mode: "anvil" });
    abi = (await loadArtifacts())["ConfidentialSettlementVault"]!.abi;
    vault = info.confidential!.contractAddress;
    usdc = info.assets["USDC"]!;
    operator = privateKeyToAccount(info.confidential!.operatorPrivateKey);
    receiptSigner = privateKeyToAccount(info.confidential!.receiptSignerPrivateKey);
    bondOwner = privateKeyToAccount(info.confidential!.bondOwnerPrivateKey);
    payerKeys = info.payerPrivateKeys;
    dir = mkdtempSync(join(tmpdir(), "vault-challenge-"));
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

  // ---- raw access, the way each key holder would ----

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
  /** The vault's refusal of a call, by its error's name. */
  const refusal = async (account: PrivateKeyAccount, functionName: string, args: unknown[]) => {
    try {
      await client.simulateContract({ address: vault, abi, functionName, args, account });
    } catch (e) {
      const found = /Error: (\w+)\(/.exec(String(e));
      return found?.[1] ?? String(e).split("\n")[0];
    }
    return "accepted";
  };
  const chainTime = async () => (await client.getBlock()).timestamp;
  const warp = async (to: bigint) => {
    await testClient.setNextBlockTimestamp({ timestamp: to });
    await testClient.mine({ blocks: 1 });
  };
  const nextDay = async (): Promise<number> => {
    const target = ((await chainTime()) / DAY + 1n) * DAY + 60n;
    await warp(target);
    return Number(target / DAY);
  };
  const today = async () => Number((await chainTime()) / DAY);
  const usdcOf = (who: Address) =>
    client.readContract({ address: usdc, abi: eip3009ABI, functionName: "balanceOf", args: [who] });

  /** A merchant's slot, bound to its address and a salt only it knows. */
  const newMerchant = async (): Promise<Merchant> => {
    const owner = privateKeyToAccount(generatePrivateKey());
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
  const pay = async (amount: bigint, payerIndex = 0): Promise<Paid> => {
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
    const submitter = privateKeyToAccount(devnet.networks[NETWORK]!.facilitatorPrivateKeys[0]!);
    const args = [payer.address, vault, amount, 0n, validBefore, nonce, signature];
    assert.equal((await send(submitter, "collect", args)).status, "success");
    return { payer: payer.address, nonce, amount };
  };

  /** The receipt the service signs for a payment to `m` (or with `signer`, a forgery). */
  const receiptFor = async (m: Merchant, p: Paid, day: number, signer = receiptSigner) => {
    const receipt: Receipt = { ...p, merchant: m.owner.address, slot: m.slot, day };
    const signature = await signer.signTypedData({
      domain: vaultDomain(CHAIN_ID, vault),
      types: receiptTypes,
      primaryType: "Receipt",
      message: receipt,
    });
    return { receipt, signature };
  };
  type Signed = Awaited<ReturnType<typeof receiptFor>>;
  const challengeArgs = (m: Merchant, day: number, signed: Signed[]) => [
    BigInt(day),
    m.slot,
    m.salt,
    signed.map((s) => s.receipt),
    signed.map((s) => s.signature),
  ];

  /** The operator's split of `day`: every slot, zero where `credits` says nothing. */
  const creditAll = async (day: number, credits: Map<bigint, bigint>) => {
    const count = await read<bigint>("slotCount");
    const all: [bigint, bigint][] = [];
    for (let s = 0n; s < count; s++) all.push([s, credits.get(s) ?? 0n]);
    for (let i = 0; i < all.length; i += 8) {
      const chunk = all.slice(i, i + 8);
      const { handles, inputProof } = await fhe.encryptAmounts(
        vault,
        operator.address,
        chunk.map(([, amount]) => amount),
      );
      const r = await send(operator, "creditSlots", [
        BigInt(day),
        chunk.map(([slot]) => slot),
        handles,
        inputProof,
      ]);
      assert.equal(r.status, "success");
    }
  };
  /** Close, then the KMS's verdict on the sum: the day is closed when the split adds up. */
  const close = async (day: number) => {
    const closed = await send(operator, "closeDay", [BigInt(day)]);
    if (closed.status !== "success") return closed.status;
    const info = await read<unknown[]>("dayInfo", [BigInt(day)]);
    const { cleartexts, proof } = await fhe.publicDecrypt([info.at(-1) as Hex]);
    return (await send(operator, "finalizeDay", [BigInt(day), cleartexts, proof])).status;
  };
  const phaseOf = async (day: number) => (await read<number[]>("dayInfo", [BigInt(day)]))[7];
  /** A challenge from the merchant's wallet, then anyone's submission of the KMS's answer. */
  const challenge = async (m: Merchant, day: number, signed: Signed[]) => {
    const opened = await send(m.owner, "challenge", challengeArgs(m, day, signed));
    assert.equal(opened.status, "success", "the challenge was refused");
    const id = (await read<bigint>("challengeCount")) - 1n;
    const [, , , , resolvedAtOnce, , handle] = await read<
      [bigint, Address, number, bigint, boolean, boolean, Hex]
    >("challengeInfo", [id]);
    if (resolvedAtOnce) return { opened, resolved: undefined, id };
    const { cleartexts, proof } = await fhe.publicDecrypt([handle]);
    const resolved = await send(m.owner, "resolveChallenge", [id, cleartexts, proof]);
    assert.equal(resolved.status, "success");
    return { opened, resolved, id };
  };
  const balanceOf = async (slot: bigint): Promise<bigint> => {
    const [, handle] = await read<[Hex, Hex]>("slotInfo", [slot]);
    if (BigInt(handle) === 0n) return 0n;
    const [value] = await fhe.userDecrypt(vault, [handle], operator);
    return value ?? 0n;
  };
  /** The slot's owner withdraws `amount`: request, then finalize with the KMS's decryption. */
  const withdraw = async (m: Merchant, amount: bigint) => {
    const [, , nonce] = await read<[Hex, Hex, bigint]>("slotInfo", [m.slot]);
    const request = {
      slot: m.slot,
      to: m.owner.address,
      amount,
      nonce,
      deadline: (await chainTime()) + 3600n,
    };
    const signature = await m.owner.signTypedData({
      domain: vaultDomain(CHAIN_ID, vault),
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
      (await send(m.owner, "requestWithdraw", [request, m.salt, signature])).status,
      "success",
    );
    const id = (await read<bigint>("withdrawalCount")) - 1n;
    const w = await read<unknown[]>("withdrawal", [id]);
    const { cleartexts, proof } = await fhe.publicDecrypt([w.at(-1) as Hex]);
    assert.equal(
      (await send(m.owner, "finalizeWithdraw", [id, cleartexts, proof])).status,
      "success",
    );
  };
  const allSlots = async () => {
    const count = await read<bigint>("slotCount");
    return Array.from({ length: Number(count) }, (_, i) => BigInt(i));
  };
  /** Past the day's window, everything of it released (as the batch does). */
  const releaseAfterWindow = async (day: number) => {
    const [closedAt] = await read<bigint[]>("dayChallenges", [BigInt(day)]);
    const endsAt = closedAt! + WINDOW;
    if ((await chainTime()) < endsAt) await warp(endsAt);
    return send(operator, "release", [BigInt(day), await allSlots()]);
  };

  test("the operator key credits a day's pool to its own slot: the merchant's receipts are paid in full from the bond, the thief gets nothing, and no day closes until the bond owner resumes", async (t) => {
    await nextDay();
    const merchant = await newMerchant();
    const thief = await newMerchant();
    const day = await today();
    const paid = [await pay(1_250_000n, 0), await pay(2_000_000n, 1)];
    const receipts = await Promise.all(paid.map((p) => receiptFor(merchant, p, day)));
    const pool = paid.reduce((a, p) => a + p.amount, 0n);
    await nextDay();

    // The theft, as the key can do it: the split adds up, so the KMS proves it.
    await creditAll(day, new Map([[thief.slot, pool]]));
    assert.equal(await close(day), "success");
    assert.equal(await phaseOf(day), 2, "closed");
    // Before the window ends nothing of the day is released: the thief waits.
    assert.equal(
      await refusal(thief.owner, "release", [BigInt(day), [thief.slot]]),
      "ChallengeWindowOpen",
    );

    const bondBefore = await read<bigint>("bond");
    const vaultBefore = await usdcOf(vault);
    const merchantBefore = await usdcOf(merchant.owner.address);
    const { opened, resolved } = await challenge(merchant, day, receipts);
    assert.ok(resolved);
    t.diagnostic(
      `challenge gas: ${opened.gasUsed} to present ${receipts.length} receipts, ${resolved.gasUsed} to resolve with a proven shortfall (paid from the bond)`,
    );

    // Paid in full, from the bond; the day is disputed; the key is frozen.
    assert.equal((await usdcOf(merchant.owner.address)) - merchantBefore, pool);
    assert.equal(await read<bigint>("bond"), bondBefore - pool);
    assert.equal(await usdcOf(vault), vaultBefore - pool);
    assert.equal(await phaseOf(day), 3, "disputed");
    assert.equal(await read<boolean>("frozen"), true);

    // The thief's stolen credit is never released, even after the window;
    // its slot has nothing to withdraw.
    await warp((await chainTime()) + WINDOW + 1n);
    assert.equal(
      await refusal(thief.owner, "release", [BigInt(day), [thief.slot]]),
      "DayNotClosed",
    );
    const thiefBefore = await usdcOf(thief.owner.address);
    await withdraw(thief, pool);
    assert.equal(await usdcOf(thief.owner.address), thiefBefore, "the thief was paid");
    assert.equal(await balanceOf(thief.slot), 0n);
    // The same receipts cannot be paid twice.
    assert.equal(
      await refusal(merchant.owner, "challenge", challengeArgs(merchant, day, receipts)),
      "ReceiptAlreadyPresented",
    );

    // The next close is refused, honest split or not, until the bond owner acts.
    const next = await today();
    const honest = await pay(300_000n, 2);
    const honestReceipt = await receiptFor(merchant, honest, next);
    await nextDay();
    await creditAll(next, new Map([[merchant.slot, honest.amount]]));
    assert.equal(await refusal(operator, "closeDay", [BigInt(next)]), "OperatorFrozen");
    // Only the bond owner resumes (the operator key cannot free itself).
    assert.equal(await refusal(operator, "resume", [operator.address]), "NotBondOwner");
    assert.equal((await send(bondOwner, "resume", [operator.address])).status, "success");
    // The bond gets back what it paid from the disputed day's pool; the
    // disputed day reopens, its pool now what its merchant did not claim.
    assert.equal(await read<bigint>("bond"), bondBefore);
    assert.equal(await phaseOf(day), 0, "reopened");
    assert.equal(await read<bigint>("dayPool", [BigInt(day)]), 0n);
    assert.equal(await read<bigint>("strayBalance"), 0n);
    assert.equal(await close(next), "success");
    assert.equal((await releaseAfterWindow(next)).status, "success");
    assert.equal(await balanceOf(merchant.slot), honest.amount);
    assert.equal(
      await refusal(merchant.owner, "challenge", challengeArgs(merchant, next, [honestReceipt])),
      "NotChallengeable",
      "past the window",
    );
  });

  test("an honest day: a challenge with true receipts moves nothing and costs the challenger only gas", async (t) => {
    await nextDay();
    const merchant = await newMerchant();
    const other = await newMerchant();
    const day = await today();
    const mine = [await pay(400_000n, 3), await pay(600_000n, 4)];
    const theirs = await pay(900_000n, 3);
    await nextDay();
    await creditAll(
      day,
      new Map([
        [merchant.slot, 1_000_000n],
        [other.slot, theirs.amount],
      ]),
    );
    assert.equal(await close(day), "success");

    const receipts = await Promise.all(mine.map((p) => receiptFor(merchant, p, day)));
    const [bond, vaultHeld, usdcBefore, ethBefore] = await Promise.all([
      read<bigint>("bond"),
      usdcOf(vault),
      usdcOf(merchant.owner.address),
      client.getBalance({ address: merchant.owner.address }),
    ]);
    const { opened, resolved } = await challenge(merchant, day, receipts);
    assert.ok(resolved);
    t.diagnostic(
      `challenge gas: ${opened.gasUsed} to present ${receipts.length} receipts, ${resolved.gasUsed} to resolve (no shortfall)`,
    );
    const [, , , , done, shortfall] = await read<unknown[]>("challengeInfo", [
      (await read<bigint>("challengeCount")) - 1n,
    ]);
    assert.deepEqual([done, shortfall], [true, false]);
    assert.equal(await read<bigint>("bond"), bond);
    assert.equal(await usdcOf(vault), vaultHeld);
    assert.equal(await usdcOf(merchant.owner.address), usdcBefore);
    const gas = [opened, resolved].reduce((a, r) => a + r.gasUsed * r.effectiveGasPrice, 0n);
    assert.equal(await client.getBalance({ address: merchant.owner.address }), ethBefore - gas);
    assert.equal(await phaseOf(day), 2, "still closed");
    assert.equal(await read<boolean>("frozen"), false);

    // After the window both merchants get exactly their split.
    assert.equal((await releaseAfterWindow(day)).status, "success");
    assert.equal(await balanceOf(merchant.slot), 1_000_000n);
    assert.equal(await balanceOf(other.slot), theirs.amount);
  });

  test("forged, reused, other-merchant, mismatched and late receipts are refused", async () => {
    await nextDay();
    const merchant = await newMerchant();
    const other = await newMerchant();
    const day = await today();
    const a = await pay(500_000n, 0);
    const b = await pay(700_000n, 1);
    const c = await pay(800_000n, 2);
    await nextDay();
    const pool = a.amount + b.amount + c.amount;
    await creditAll(
      day,
      new Map([
        [merchant.slot, a.amount + b.amount],
        [other.slot, c.amount],
      ]),
    );
    assert.equal(await close(day), "success");
    const bond = await read<bigint>("bond");

    const attempt = (m: Merchant, signed: Signed[], from = m.owner) =>
      refusal(from, "challenge", challengeArgs(m, day, signed));
    // Signed by a key that is not the vault's receipt signer.
    const forger = privateKeyToAccount(generatePrivateKey());
    assert.equal(
      await attempt(merchant, [await receiptFor(merchant, a, day, forger)]),
      "InvalidSignature",
    );
    // A true receipt with its amount raised (the signature no longer matches),
    // and one the signer signed with another amount than the vault collected.
    const raised = await receiptFor(merchant, a, day);
    raised.receipt = { ...raised.receipt, amount: a.amount * 10n };
    assert.equal(await attempt(merchant, [raised]), "InvalidSignature");
    assert.equal(
      await attempt(merchant, [await receiptFor(merchant, { ...a, amount: a.amount * 10n }, day)]),
      "ReceiptMismatch",
    );
    // A payment the vault never collected.
    assert.equal(
      await attempt(merchant, [
        await receiptFor(merchant, { ...a, nonce: toHex(randomBytes(32)) }, day),
      ]),
      "PaymentNotCollected",
    );
    // Another merchant's receipt, presented by this merchant for its own slot,
    // and by its wallet without the other's salt.
    const theirs = await receiptFor(other, c, day);
    assert.equal(await attempt(merchant, [theirs]), "ReceiptNotForChallenge");
    assert.equal(await attempt(other, [theirs], merchant.owner), "NotSlotOwner");
    // The same receipt twice in one challenge, then again in a second one.
    const first = await receiptFor(merchant, a, day);
    assert.equal(await attempt(merchant, [first, first]), "ReceiptAlreadyPresented");
    await challenge(merchant, day, [first]);
    assert.equal(await attempt(merchant, [first]), "ReceiptAlreadyPresented");
    // After the window: too late, the day is released.
    assert.equal((await releaseAfterWindow(day)).status, "success");
    assert.equal(await attempt(merchant, [await receiptFor(merchant, b, day)]), "NotChallengeable");

    // Nothing moved: the bond is whole, and each slot holds its split.
    assert.equal(await read<bigint>("bond"), bond);
    assert.equal(await balanceOf(merchant.slot), a.amount + b.amount);
    assert.equal(await balanceOf(other.slot), c.amount);
    assert.equal(await read<bigint>("dayPool", [BigInt(day)]), pool);
  });

  test("the receipt-signer key signs itself a second receipt for a merchant's payment: both are paid, from the bond alone", async () => {
    await nextDay();
    const victim = await newMerchant();
    const forger = await newMerchant(); // a merchant account of the key's holder
    const day = await today();
    const paid = await pay(1_100_000n, 2);
    await nextDay();
    // The operator's split is honest.
    await creditAll(day, new Map([[victim.slot, paid.amount]]));
    assert.equal(await close(day), "success");
    const [bond, vaultHeld] = await Promise.all([read<bigint>("bond"), usdcOf(vault)]);

    // The forger's receipt shows more than its credit: a "shortfall", paid.
    const forged = await receiptFor(forger, paid, day);
    const forgerBefore = await usdcOf(forger.owner.address);
    await challenge(forger, day, [forged]);
    assert.equal((await usdcOf(forger.owner.address)) - forgerBefore, paid.amount);
    assert.equal(await phaseOf(day), 3, "disputed");

    // The real merchant's receipt for the same payment proves the signer
    // signed two: it is paid too, at once, from the bond.
    const victimBefore = await usdcOf(victim.owner.address);
    const { resolved } = await challenge(victim, day, [await receiptFor(victim, paid, day)]);
    assert.equal(resolved, undefined, "paid at once on a disputed day");
    assert.equal((await usdcOf(victim.owner.address)) - victimBefore, paid.amount);
    assert.equal(await read<bigint>("bond"), bond - 2n * paid.amount);
    assert.equal(await usdcOf(vault), vaultHeld - 2n * paid.amount);
    // Neither can present it again.
    for (const m of [victim, forger]) {
      assert.equal(
        await refusal(
          m.owner,
          "challenge",
          challengeArgs(m, day, [await receiptFor(m, paid, day)]),
        ),
        "ReceiptAlreadyPresented",
      );
    }

    // Resuming gives the bond back only what came out of the day's pool.
    assert.equal((await send(bondOwner, "resume", [operator.address])).status, "success");
    assert.equal(await read<bigint>("bond"), bond - paid.amount);
    assert.equal(await read<bigint>("dayPool", [BigInt(day)]), 0n);
    assert.equal(await read<bigint>("strayBalance"), 0n);
    assert.equal(
      await balanceOf(victim.slot),
      0n,
      "its credit of the disputed day was not released",
    );
  });

  test("a bond below what a day collected: the day cannot close until the bond is topped up", async () => {
    await nextDay();
    const merchant = await newMerchant();
    const day = await today();
    const paid = await pay(2_500_000n, 4);
    await nextDay();
    await creditAll(day, new Map([[merchant.slot, paid.amount]]));

    // The bond owner takes back all but one unit less than the day collected.
    const [bond, committed] = await Promise.all([
      read<bigint>("bond"),
      read<bigint>("bondCommitted"),
    ]);
    const keep = committed + paid.amount - 1n;
    assert.equal(
      (await send(bondOwner, "withdrawBond", [bondOwner.address, bond - keep])).status,
      "success",
    );
    assert.equal(await refusal(operator, "closeDay", [BigInt(day)]), "BondTooLow");
    // Neither the operator nor anyone but the bond owner withdraws the bond.
    assert.equal(await refusal(operator, "withdrawBond", [operator.address, 1n]), "NotBondOwner");

    // The top-up: anyone may deposit; then the day closes.
    const usdcAbi = (await loadArtifacts())["DevnetUSDC"]!.abi;
    const wallet = createWalletClient({
      transport: http(rpcUrl),
      account: bondOwner,
      chain: CHAIN,
    });
    const approve = await wallet.writeContract({
      address: usdc,
      abi: usdcAbi,
      functionName: "approve",
      args: [vault, bond - keep],
      chain: CHAIN,
    });
    await client.waitForTransactionReceipt({ hash: approve });
    assert.equal((await send(bondOwner, "depositBond", [bond - keep])).status, "success");
    assert.equal(await read<bigint>("bond"), bond);
    assert.equal(await close(day), "success");
    // A closed day in its window holds its share of the bond.
    assert.equal(await read<bigint>("bondCommitted"), committed + paid.amount);
    assert.equal((await releaseAfterWindow(day)).status, "success");
    assert.equal(await read<bigint>("bondCommitted"), committed);
    assert.equal(await balanceOf(merchant.slot), paid.amount);
  });
});
