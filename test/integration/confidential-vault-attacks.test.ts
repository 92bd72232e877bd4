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
import { randomBytes } from "node:crypto";
import { toHex, type Address, type Hex, type PrivateKeyAccount } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { receiptTypes, vaultDomain } from "../../src/chains/evm/confidential/messages.js";
import { startDevnetVault, VAULT_CHAIN_ID, type DevnetVault } from "../chains/evm/devnetVault.js";

const DAY = 86_400n;

describe("what the vault's keys can take (devnet, fhEVM mock)", () => {
  let vault: DevnetVault;

  before(async () => {
    vault = await startDevnetVault();
  });

  after(async () => {
    await vault?.stop();
  });

  // ---- raw access, the way a key holder would ----

  const has = (name: string) =>
    vault.abi.some((e) => e.type === "function" && (e as { name: string }).name === name);
  /** A slot the operator creates for an address of its own, with a salt it knows. */
  const ownSlot = (owner: PrivateKeyAccount) => vault.assignSlot(owner);

  const mint = async (wrapAround: boolean) => {
    await vault.nextDay();
    const honest = await ownSlot(privateKeyToAccount(generatePrivateKey()));
    const thief = await ownSlot(privateKeyToAccount(generatePrivateKey()));
    const accomplice = await ownSlot(privateKeyToAccount(generatePrivateKey()));
    const day = Number((await vault.chainTime()) / DAY);
    await vault.pay(1_000_000n, 0);
    await vault.pay(2_000_000n, 1);
    await vault.nextDay();
    const held = await vault.usdcOf(vault.address);
    // The honest merchant gets its 3 USDC; the thief the vault's whole
    // balance; with the wraparound, the accomplice 2^64 - held, so a 64-bit
    // sum of the credits comes back to exactly the day's 3 USDC.
    const credits = new Map<bigint, bigint>([
      [honest.slot, 3_000_000n],
      [thief.slot, held],
    ]);
    if (wrapAround) credits.set(accomplice.slot, 2n ** 64n - held);
    await vault.creditAll(day, credits);
    await vault.close(day);
    const thiefBefore = await vault.usdcOf(thief.owner.address);
    await vault.withdraw(thief, held);
    return { thiefGot: (await vault.usdcOf(thief.owner.address)) - thiefBefore, held, thief, day };
  };
  /** The KMS proved the credits wrong: the day reopened for a new attempt, nothing released. */
  const rejected = async (day: number) => {
    if (!has("finalizeDay")) return;
    const [, , , , attempt, , released, phase] = await vault.read<number[]>("dayInfo", [
      BigInt(day),
    ]);
    assert.deepEqual({ attempt, released, phase }, { attempt: 1, released: 0, phase: 0 });
  };

  test("the operator key mints a slot the vault's balance and withdraws it: the vault pays nothing", async () => {
    const { thiefGot, held, thief, day } = await mint(false);
    assert.equal(thiefGot, 0n, "the thief was paid");
    await rejected(day);
    assert.equal(await vault.usdcOf(vault.address), held, "the vault's USDC is intact");
    assert.equal(await vault.balanceOf(thief.slot), 0n);
  });

  test("the operator key mints with a credit that wraps the day's sum around: the vault pays nothing", async () => {
    const { thiefGot, held, thief, day } = await mint(true);
    assert.equal(thiefGot, 0n, "the thief was paid");
    await rejected(day);
    assert.equal(await vault.usdcOf(vault.address), held, "the vault's USDC is intact");
    assert.equal(await vault.balanceOf(thief.slot), 0n);
  });

  test("the operator key spends a credit before its day is proven: nothing moves", async () => {
    await vault.nextDay();
    const thief = await ownSlot(privateKeyToAccount(generatePrivateKey()));
    const day = Number((await vault.chainTime()) / DAY);
    const paid = await vault.pay(500_000n, 2);
    await vault.nextDay();
    // The honest split, even: the credit is the day's whole pool, to the thief.
    await vault.creditAll(day, new Map([[thief.slot, paid.amount]]));
    const before = await vault.usdcOf(thief.owner.address);
    await vault.withdraw(thief, paid.amount);
    assert.equal(await vault.usdcOf(thief.owner.address), before, "pending credit was spent");
  });

  test("the receipt-signer key with a merchant account forges receipts: every one is refused", async () => {
    await vault.nextDay();
    const merchant = await ownSlot(privateKeyToAccount(generatePrivateKey()));
    const day = Number((await vault.chainTime()) / DAY);
    const real = await vault.pay(700_000n, 3);
    await vault.nextDay();
    await vault.nextDay(); // past the redemption delay, the day still open
    const receipt = (r: { payer: Address; nonce: Hex; amount: bigint; day: number }) => ({
      payer: r.payer,
      nonce: r.nonce,
      merchant: merchant.owner.address,
      slot: merchant.slot,
      amount: r.amount,
      day: r.day,
    });
    const sign = (r: ReturnType<typeof receipt>) =>
      vault.receiptSigner.signTypedData({
        domain: vaultDomain(VAULT_CHAIN_ID, vault.address),
        types: receiptTypes,
        primaryType: "Receipt",
        message: r,
      });
    // The collecting vault also asks for the slot's salt (only its merchant redeems).
    const withSalt =
      (
        vault.abi.find((e) => e.type === "function" && e.name === "redeemReceipt") as unknown as {
          inputs: unknown[];
        }
      ).inputs.length === 3;
    const redeem = async (r: ReturnType<typeof receipt>) =>
      (
        await vault.send(merchant.owner, "redeemReceipt", [
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
    assert.equal(await vault.balanceOf(merchant.slot), 0n);
    // The true receipt, once; then the batch of its day cannot count it again.
    assert.equal(await redeem(receipt({ ...real, day })), "success");
    assert.equal(await redeem(receipt({ ...real, day })), "reverted", "redeemed twice");
    assert.equal(await vault.balanceOf(merchant.slot), 700_000n);

    // A payment of a day the batch closed: refused.
    const closedDay = Number((await vault.chainTime()) / DAY);
    const batched = await vault.pay(300_000n, 3);
    await vault.nextDay();
    await vault.creditAll(closedDay, new Map([[merchant.slot, batched.amount]]));
    assert.equal(await vault.close(closedDay), "success");
    await vault.nextDay();
    await vault.nextDay();
    assert.equal(
      await redeem(receipt({ ...batched, day: closedDay })),
      "reverted",
      "a receipt of a closed day",
    );
  });
});
