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
import { randomBytes } from "node:crypto";
import { toHex, type Address, type Hex, type PrivateKeyAccount } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { loadArtifacts } from "../../devnet/evm/compile.js";
import {
  receiptTypes,
  vaultDomain,
  type Receipt,
} from "../../src/chains/evm/confidential/messages.js";
import { devnetWallet } from "../chains/evm/devnetChain.js";
import {
  startDevnetVault,
  VAULT_CHAIN_ID,
  type CollectedPayment,
  type DevnetVault,
  type OwnedSlot,
} from "../chains/evm/devnetVault.js";

const DAY = 86_400n;
/** Two days, as a production deployment defaults to. */
const WINDOW = 2n * DAY;

/** A merchant's slot, bound to its address and a salt only it knows. */
type Merchant = OwnedSlot;

describe("a receipt the operator must honour (devnet, fhEVM mock)", () => {
  let vault: DevnetVault;

  before(async () => {
    vault = await startDevnetVault({ challengeWindowSeconds: Number(WINDOW) });
  });

  after(async () => {
    await vault?.stop();
  });

  // ---- raw access, the way each key holder would ----

  /** The vault's refusal of a call, by its error's name. */
  const refusal = async (account: PrivateKeyAccount, functionName: string, args: unknown[]) => {
    try {
      await vault.client.simulateContract({
        address: vault.address,
        abi: vault.abi,
        functionName,
        args,
        account,
      });
    } catch (e) {
      const found = /Error: (\w+)\(/.exec(String(e));
      return found?.[1] ?? String(e).split("\n")[0];
    }
    return "accepted";
  };
  const newMerchant = (): Promise<Merchant> => vault.assignSlot();

  /** The receipt the service signs for a payment to `m` (or with `signer`, a forgery). */
  const receiptFor = async (
    m: Merchant,
    p: CollectedPayment,
    day: number,
    signer = vault.receiptSigner,
  ) => {
    const receipt: Receipt = { ...p, merchant: m.owner.address, slot: m.slot, day };
    const signature = await signer.signTypedData({
      domain: vaultDomain(VAULT_CHAIN_ID, vault.address),
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

  const phaseOf = async (day: number) => (await vault.read<number[]>("dayInfo", [BigInt(day)]))[7];
  /** A challenge from the merchant's wallet, then anyone's submission of the KMS's answer. */
  const challenge = async (m: Merchant, day: number, signed: Signed[]) => {
    const opened = await vault.send(m.owner, "challenge", challengeArgs(m, day, signed));
    assert.equal(opened.status, "success", "the challenge was refused");
    const id = (await vault.read<bigint>("challengeCount")) - 1n;
    const [, , , , resolvedAtOnce, , handle] = await vault.read<
      [bigint, Address, number, bigint, boolean, boolean, Hex]
    >("challengeInfo", [id]);
    if (resolvedAtOnce) return { opened, resolved: undefined, id };
    const { cleartexts, proof } = await vault.fhe.publicDecrypt([handle]);
    const resolved = await vault.send(m.owner, "resolveChallenge", [id, cleartexts, proof]);
    assert.equal(resolved.status, "success");
    return { opened, resolved, id };
  };
  const allSlots = async () => {
    const count = await vault.read<bigint>("slotCount");
    return Array.from({ length: Number(count) }, (_, i) => BigInt(i));
  };
  /** Past the day's window, everything of it released (as the batch does). */
  const releaseAfterWindow = async (day: number) => {
    const [closedAt] = await vault.read<bigint[]>("dayChallenges", [BigInt(day)]);
    const endsAt = closedAt! + WINDOW;
    if ((await vault.chainTime()) < endsAt) await vault.warp(endsAt);
    return vault.send(vault.operator, "release", [BigInt(day), await allSlots()]);
  };

  test("the operator key credits a day's pool to its own slot: the merchant's receipts are paid in full from the bond, the thief gets nothing, and no day closes until the bond owner resumes", async (t) => {
    await vault.nextDay();
    const merchant = await newMerchant();
    const thief = await newMerchant();
    const day = await vault.today();
    const paid = [await vault.pay(1_250_000n, 0), await vault.pay(2_000_000n, 1)];
    const receipts = await Promise.all(paid.map((p) => receiptFor(merchant, p, day)));
    const pool = paid.reduce((a, p) => a + p.amount, 0n);
    await vault.nextDay();

    // The theft, as the key can do it: the split adds up, so the KMS proves it.
    await vault.creditAll(day, new Map([[thief.slot, pool]]));
    assert.equal(await vault.close(day), "success");
    assert.equal(await phaseOf(day), 2, "closed");
    // Before the window ends nothing of the day is released: the thief waits.
    assert.equal(
      await refusal(thief.owner, "release", [BigInt(day), [thief.slot]]),
      "ChallengeWindowOpen",
    );

    const bondBefore = await vault.read<bigint>("bond");
    const vaultBefore = await vault.usdcOf(vault.address);
    const merchantBefore = await vault.usdcOf(merchant.owner.address);
    const { opened, resolved } = await challenge(merchant, day, receipts);
    assert.ok(resolved);
    t.diagnostic(
      `challenge gas: ${opened.gasUsed} to present ${receipts.length} receipts, ${resolved.gasUsed} to resolve with a proven shortfall (paid from the bond)`,
    );

    // Paid in full, from the bond; the day is disputed; the key is frozen.
    assert.equal((await vault.usdcOf(merchant.owner.address)) - merchantBefore, pool);
    assert.equal(await vault.read<bigint>("bond"), bondBefore - pool);
    assert.equal(await vault.usdcOf(vault.address), vaultBefore - pool);
    assert.equal(await phaseOf(day), 3, "disputed");
    assert.equal(await vault.read<boolean>("frozen"), true);

    // The thief's stolen credit is never released, even after the window;
    // its slot has nothing to withdraw.
    await vault.warp((await vault.chainTime()) + WINDOW + 1n);
    assert.equal(
      await refusal(thief.owner, "release", [BigInt(day), [thief.slot]]),
      "DayNotClosed",
    );
    const thiefBefore = await vault.usdcOf(thief.owner.address);
    await vault.withdraw(thief, pool);
    assert.equal(await vault.usdcOf(thief.owner.address), thiefBefore, "the thief was paid");
    assert.equal(await vault.balanceOf(thief.slot), 0n);
    // The same receipts cannot be paid twice.
    assert.equal(
      await refusal(merchant.owner, "challenge", challengeArgs(merchant, day, receipts)),
      "ReceiptAlreadyPresented",
    );

    // The next close is refused, honest split or not, until the bond owner acts.
    const next = await vault.today();
    const honest = await vault.pay(300_000n, 2);
    const honestReceipt = await receiptFor(merchant, honest, next);
    await vault.nextDay();
    await vault.creditAll(next, new Map([[merchant.slot, honest.amount]]));
    assert.equal(await refusal(vault.operator, "closeDay", [BigInt(next)]), "OperatorFrozen");
    // Only the bond owner resumes (the operator key cannot free itself).
    assert.equal(await refusal(vault.operator, "resume", [vault.operator.address]), "NotBondOwner");
    assert.equal(
      (await vault.send(vault.bondOwner, "resume", [vault.operator.address])).status,
      "success",
    );
    // The bond gets back what it paid from the disputed day's pool; the
    // disputed day reopens, its pool now what its merchant did not claim.
    assert.equal(await vault.read<bigint>("bond"), bondBefore);
    assert.equal(await phaseOf(day), 0, "reopened");
    assert.equal(await vault.read<bigint>("dayPool", [BigInt(day)]), 0n);
    assert.equal(await vault.read<bigint>("strayBalance"), 0n);
    assert.equal(await vault.close(next), "success");
    assert.equal((await releaseAfterWindow(next)).status, "success");
    assert.equal(await vault.balanceOf(merchant.slot), honest.amount);
    assert.equal(
      await refusal(merchant.owner, "challenge", challengeArgs(merchant, next, [honestReceipt])),
      "NotChallengeable",
      "past the window",
    );
  });

  test("an honest day: a challenge with true receipts moves nothing and costs the challenger only gas", async (t) => {
    await vault.nextDay();
    const merchant = await newMerchant();
    const other = await newMerchant();
    const day = await vault.today();
    const mine = [await vault.pay(400_000n, 3), await vault.pay(600_000n, 4)];
    const theirs = await vault.pay(900_000n, 3);
    await vault.nextDay();
    await vault.creditAll(
      day,
      new Map([
        [merchant.slot, 1_000_000n],
        [other.slot, theirs.amount],
      ]),
    );
    assert.equal(await vault.close(day), "success");

    const receipts = await Promise.all(mine.map((p) => receiptFor(merchant, p, day)));
    const [bond, vaultHeld, usdcBefore, ethBefore] = await Promise.all([
      vault.read<bigint>("bond"),
      vault.usdcOf(vault.address),
      vault.usdcOf(merchant.owner.address),
      vault.client.getBalance({ address: merchant.owner.address }),
    ]);
    const { opened, resolved } = await challenge(merchant, day, receipts);
    assert.ok(resolved);
    t.diagnostic(
      `challenge gas: ${opened.gasUsed} to present ${receipts.length} receipts, ${resolved.gasUsed} to resolve (no shortfall)`,
    );
    const [, , , , done, shortfall] = await vault.read<unknown[]>("challengeInfo", [
      (await vault.read<bigint>("challengeCount")) - 1n,
    ]);
    assert.deepEqual([done, shortfall], [true, false]);
    assert.equal(await vault.read<bigint>("bond"), bond);
    assert.equal(await vault.usdcOf(vault.address), vaultHeld);
    assert.equal(await vault.usdcOf(merchant.owner.address), usdcBefore);
    const gas = [opened, resolved].reduce((a, r) => a + r.gasUsed * r.effectiveGasPrice, 0n);
    assert.equal(
      await vault.client.getBalance({ address: merchant.owner.address }),
      ethBefore - gas,
    );
    assert.equal(await phaseOf(day), 2, "still closed");
    assert.equal(await vault.read<boolean>("frozen"), false);

    // After the window both merchants get exactly their split.
    assert.equal((await releaseAfterWindow(day)).status, "success");
    assert.equal(await vault.balanceOf(merchant.slot), 1_000_000n);
    assert.equal(await vault.balanceOf(other.slot), theirs.amount);
  });

  test("forged, reused, other-merchant, mismatched and late receipts are refused", async () => {
    await vault.nextDay();
    const merchant = await newMerchant();
    const other = await newMerchant();
    const day = await vault.today();
    const a = await vault.pay(500_000n, 0);
    const b = await vault.pay(700_000n, 1);
    const c = await vault.pay(800_000n, 2);
    await vault.nextDay();
    const pool = a.amount + b.amount + c.amount;
    await vault.creditAll(
      day,
      new Map([
        [merchant.slot, a.amount + b.amount],
        [other.slot, c.amount],
      ]),
    );
    assert.equal(await vault.close(day), "success");
    const bond = await vault.read<bigint>("bond");

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
    assert.equal(await vault.read<bigint>("bond"), bond);
    assert.equal(await vault.balanceOf(merchant.slot), a.amount + b.amount);
    assert.equal(await vault.balanceOf(other.slot), c.amount);
    assert.equal(await vault.read<bigint>("dayPool", [BigInt(day)]), pool);
  });

  test("the receipt-signer key signs itself a second receipt for a merchant's payment: both are paid, from the bond alone", async () => {
    await vault.nextDay();
    const victim = await newMerchant();
    const forger = await newMerchant(); // a merchant account of the key's holder
    const day = await vault.today();
    const paid = await vault.pay(1_100_000n, 2);
    await vault.nextDay();
    // The operator's split is honest.
    await vault.creditAll(day, new Map([[victim.slot, paid.amount]]));
    assert.equal(await vault.close(day), "success");
    const [bond, vaultHeld] = await Promise.all([
      vault.read<bigint>("bond"),
      vault.usdcOf(vault.address),
    ]);

    // The forger's receipt shows more than its credit: a "shortfall", paid.
    const forged = await receiptFor(forger, paid, day);
    const forgerBefore = await vault.usdcOf(forger.owner.address);
    await challenge(forger, day, [forged]);
    assert.equal((await vault.usdcOf(forger.owner.address)) - forgerBefore, paid.amount);
    assert.equal(await phaseOf(day), 3, "disputed");

    // The real merchant's receipt for the same payment proves the signer
    // signed two: it is paid too, at once, from the bond.
    const victimBefore = await vault.usdcOf(victim.owner.address);
    const { resolved } = await challenge(victim, day, [await receiptFor(victim, paid, day)]);
    assert.equal(resolved, undefined, "paid at once on a disputed day");
    assert.equal((await vault.usdcOf(victim.owner.address)) - victimBefore, paid.amount);
    assert.equal(await vault.read<bigint>("bond"), bond - 2n * paid.amount);
    assert.equal(await vault.usdcOf(vault.address), vaultHeld - 2n * paid.amount);
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
    assert.equal(
      (await vault.send(vault.bondOwner, "resume", [vault.operator.address])).status,
      "success",
    );
    assert.equal(await vault.read<bigint>("bond"), bond - paid.amount);
    assert.equal(await vault.read<bigint>("dayPool", [BigInt(day)]), 0n);
    assert.equal(await vault.read<bigint>("strayBalance"), 0n);
    assert.equal(
      await vault.balanceOf(victim.slot),
      0n,
      "its credit of the disputed day was not released",
    );
  });

  test("a bond below what a day collected: the day cannot close until the bond is topped up", async () => {
    await vault.nextDay();
    const merchant = await newMerchant();
    const day = await vault.today();
    const paid = await vault.pay(2_500_000n, 4);
    await vault.nextDay();
    await vault.creditAll(day, new Map([[merchant.slot, paid.amount]]));

    // The bond owner takes back all but one unit less than the day collected.
    const [bond, committed] = await Promise.all([
      vault.read<bigint>("bond"),
      vault.read<bigint>("bondCommitted"),
    ]);
    const keep = committed + paid.amount - 1n;
    assert.equal(
      (await vault.send(vault.bondOwner, "withdrawBond", [vault.bondOwner.address, bond - keep]))
        .status,
      "success",
    );
    assert.equal(await refusal(vault.operator, "closeDay", [BigInt(day)]), "BondTooLow");
    // Neither the operator nor anyone but the bond owner withdraws the bond.
    assert.equal(
      await refusal(vault.operator, "withdrawBond", [vault.operator.address, 1n]),
      "NotBondOwner",
    );

    // The top-up: anyone may deposit; then the day closes.
    const usdcAbi = (await loadArtifacts())["DevnetUSDC"]!.abi;
    const approve = await devnetWallet(vault.bondOwner, vault.rpcUrl, VAULT_CHAIN_ID).writeContract(
      {
        address: vault.usdc,
        abi: usdcAbi,
        functionName: "approve",
        args: [vault.address, bond - keep],
      },
    );
    await vault.client.waitForTransactionReceipt({ hash: approve });
    assert.equal(
      (await vault.send(vault.bondOwner, "depositBond", [bond - keep])).status,
      "success",
    );
    assert.equal(await vault.read<bigint>("bond"), bond);
    assert.equal(await vault.close(day), "success");
    // A closed day in its window holds its share of the bond.
    assert.equal(await vault.read<bigint>("bondCommitted"), committed + paid.amount);
    assert.equal((await releaseAfterWindow(day)).status, "success");
    assert.equal(await vault.read<bigint>("bondCommitted"), committed);
    assert.equal(await vault.balanceOf(merchant.slot), paid.amount);
  });
});
