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
 * - There is no receipt-signer key any more: a payment is committed to its
 *   merchant's slot when collected. The operator key with a merchant
 *   account of its own: an attribution another key signed, and claims of a
 *   merchant's payment for its own slot, must all be refused.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { toHex, type Hex, type PrivateKeyAccount } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { startDevnetVault, type DevnetVault } from "../chains/evm/devnetVault.js";
import { vaultDomain, withdrawTypes } from "../../src/chains/evm/confidential/messages.js";

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
    await vault.pay(1_000_000n, 0, honest);
    await vault.pay(2_000_000n, 1, honest);
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
    const paid = await vault.pay(500_000n, 2, thief);
    await vault.nextDay();
    // The honest split, even: the credit is the day's whole pool, to the thief.
    await vault.creditAll(day, new Map([[thief.slot, paid.amount]]));
    const before = await vault.usdcOf(thief.owner.address);
    await vault.withdraw(thief, paid.amount);
    assert.equal(await vault.usdcOf(thief.owner.address), before, "pending credit was spent");
  });

  test("there is no receipt-signer key: the operator key with a merchant account of its own claims a merchant's payments, and every claim is refused", async () => {
    await vault.nextDay();
    const merchant = await ownSlot(privateKeyToAccount(generatePrivateKey()));
    const own = await ownSlot(privateKeyToAccount(generatePrivateKey())); // the key holder's
    const real = await vault.pay(700_000n, 3, merchant);
    // A collect whose attribution another key signed is refused outright.
    const forged = privateKeyToAccount(generatePrivateKey());
    const { key, args } = await vault.authorize(1n, 4);
    const commitment = toHex(randomBytes(32));
    const refusedWith = (signer: PrivateKeyAccount) =>
      vault.attribution(key, commitment, signer).then((attribution) =>
        vault.client
          .simulateContract({
            address: vault.address,
            abi: vault.abi,
            functionName: "collect",
            args: [...args, attribution],
            account: vault.operator,
          })
          .then(
            () => "accepted",
            (e: unknown) => /Error: (\w+)\(/.exec(String(e))?.[1] ?? String(e),
          ),
      );
    const refused = await refusedWith(forged);
    assert.equal(await refusedWith(vault.operator), "accepted", "the operator's own");
    assert.equal(refused, "InvalidSignature");
    await vault.nextDay();
    await vault.nextDay(); // past the redemption delay, the day still open
    const redeem = (slot: bigint, blinding: Hex) =>
      vault.send(own.owner, "redeem", [real.key, slot, blinding]).then((r) => r.status);
    // The merchant's payment, to the key holder's slot: its blinding, a made-up one.
    assert.equal(await redeem(own.slot, real.opening!.blinding), "reverted");
    assert.equal(await redeem(own.slot, toHex(randomBytes(32))), "reverted");
    assert.equal(await vault.balanceOf(own.slot), 0n);
    // The true opening, sent by anyone: credited once, to the merchant's slot only.
    assert.equal(await redeem(merchant.slot, real.opening!.blinding), "success");
    assert.equal(await redeem(merchant.slot, real.opening!.blinding), "reverted", "twice");
    assert.equal(await vault.balanceOf(merchant.slot), 700_000n);
    assert.equal(await vault.balanceOf(own.slot), 0n);

    // A payment of a day the batch closed: refused.
    const closedDay = Number((await vault.chainTime()) / DAY);
    const batched = await vault.pay(300_000n, 3, merchant);
    await vault.nextDay();
    await vault.creditAll(closedDay, new Map([[merchant.slot, batched.amount]]));
    assert.equal(await vault.close(closedDay), "success");
    await vault.nextDay();
    await vault.nextDay();
    assert.equal(
      (
        await vault.send(own.owner, "redeem", [
          batched.key,
          merchant.slot,
          batched.opening!.blinding,
        ])
      ).status,
      "reverted",
      "a payment of a closed day",
    );
  });

  test("the KMS is a custody root, bounded: a forged decryption pays a withdrawal, but never past everything ever credited (the bond and open days' pools stay)", async () => {
    await vault.nextDay();
    const honest = await ownSlot(privateKeyToAccount(generatePrivateKey()));
    const colluder = await ownSlot(privateKeyToAccount(generatePrivateKey()));
    const day = Number((await vault.chainTime()) / DAY);
    await vault.pay(1_000_000n, 0, honest);
    await vault.nextDay();
    await vault.creditAll(day, new Map([[honest.slot, 1_000_000n]]));
    assert.equal(await vault.close(day), "success");
    await vault.pay(5_000_000n, 1, honest); // today's, in no balance yet
    const [credited, paidOut, held] = await Promise.all([
      vault.read<bigint>("totalCredited"),
      vault.read<bigint>("totalPaidOut"),
      vault.usdcOf(vault.address),
    ]);
    // The colluding slot has nothing; it asks for all the vault holds (the
    // bond and today's pool included), and the KMS says the debit happened.
    const request = async (amount: bigint) => {
      const [, , nonce] = await vault.read<[Hex, Hex, bigint]>("slotInfo", [colluder.slot]);
      const req = {
        slot: colluder.slot,
        to: colluder.owner.address,
        amount,
        nonce,
        deadline: (await vault.chainTime()) + 3600n,
      };
      const signature = await colluder.owner.signTypedData({
        domain: vaultDomain(8453, vault.address),
        types: withdrawTypes,
        primaryType: "Withdraw",
        message: req,
      });
      assert.equal(
        (await vault.send(colluder.owner, "requestWithdraw", [req, colluder.salt, signature]))
          .status,
        "success",
      );
      const id = (await vault.read<bigint>("withdrawalCount")) - 1n;
      const w = await vault.read<unknown[]>("withdrawal", [id]);
      const forged = await vault.forgeDecryption(w.at(-1) as Hex, true);
      return vault.send(colluder.owner, "finalizeWithdraw", [id, forged.cleartexts, forged.proof]);
    };
    assert.equal((await request(held)).status, "reverted", "paid past what was ever credited");
    assert.equal(await vault.usdcOf(vault.address), held);
    // Within what was credited it is paid: the KMS can take merchants'
    // credited money, which is why it is a root of custody, not only of privacy.
    assert.equal((await request(credited - paidOut)).status, "success");
    assert.equal(await vault.usdcOf(vault.address), held - (credited - paidOut));
    assert.ok((await vault.usdcOf(vault.address)) >= (await vault.read<bigint>("bond")));
  });
});
