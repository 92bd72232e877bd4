/**
 * The commitment the operator must honour (issues 50 and 65), against the
 * real vault on the devnet's eip155:8453 with the fhEVM mock, driven by raw
 * transactions signed with the keys themselves (the operator's, a watcher's,
 * the bond owner's, the payers'): nothing of the service stands in between.
 *
 * Every payment is committed to its merchant's slot when collected; a
 * receipt is that commitment's opening. So:
 * - the operator key credits a day's pool to a slot of its own: a watcher
 *   holding the merchant's receipts (not the merchant) proves it inside the
 *   window; the bond pays the shortfall into the merchant's balance and
 *   never gets it back; the thief's slot gets nothing; the merchant's own
 *   payments are redeemed to it on the disputed day; no day closes until
 *   the bond owner resumes with another key;
 * - an honest day: a challenge moves nothing and costs its sender only gas;
 * - no key can make a claim: openings for another slot, made-up blindings,
 *   unattributed payments, forged attributions, another day's payments,
 *   duplicates and late openings are all refused; a payment opens to one
 *   slot only, so no slot can claim another's (the audit's C-1 and H-5);
 * - after a resume the reopened day's new split is challengeable with the
 *   same receipts (M-4), and resume waits for every open challenge of a
 *   disputed day to be decided.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { toHex, type Hex, type PrivateKeyAccount } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import {
  startDevnetVault,
  type CollectedPayment,
  type DevnetVault,
  type OwnedSlot,
} from "../chains/evm/devnetVault.js";

const DAY = 86_400n;
/** Two days, as a production deployment defaults to. */
const WINDOW = 2n * DAY;

type Merchant = OwnedSlot;

describe("the commitment the operator must honour (devnet, fhEVM mock)", () => {
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
  const openings = (paid: CollectedPayment[]) =>
    paid.map((p) => ({ key: p.key, blinding: p.opening!.blinding }));
  const phaseOf = async (day: number) => (await vault.read<number[]>("dayInfo", [BigInt(day)]))[7];

  /** Past the day's window, everything of it released (as the batch does). */
  const releaseAfterWindow = async (day: number) => {
    const [closedAt] = await vault.read<bigint[]>("dayChallenges", [BigInt(day)]);
    const endsAt = closedAt! + WINDOW;
    if ((await vault.chainTime()) < endsAt) await vault.warp(endsAt);
    return vault.send(vault.operator, "release", [BigInt(day), await vault.allSlots()]);
  };

  test("the operator key credits a day's pool to its own slot: a watcher with the merchant's receipts proves it, the bond pays the shortfall for good, the thief gets nothing, and nothing closes until the bond owner resumes with another key", async (t) => {
    await vault.nextDay();
    const merchant = await newMerchant();
    const thief = await newMerchant();
    const watcher = await vault.someone(); // holds the merchant's receipts, not its keys
    const day = await vault.today();
    const paid = [
      await vault.pay(1_250_000n, 0, merchant),
      await vault.pay(2_000_000n, 1, merchant),
    ];
    const pool = paid.reduce((a, p) => a + p.amount, 0n);
    await vault.nextDay();

    // The theft, as the key can do it: the split adds up, so the KMS proves it.
    await vault.creditAll(day, new Map([[thief.slot, pool]]));
    assert.equal(await vault.close(day), "success");
    assert.equal(await phaseOf(day), 2, "closed");
    assert.equal(
      await refusal(thief.owner, "release", [BigInt(day), [thief.slot]]),
      "ChallengeWindowOpen",
      "nothing is released before the window ends",
    );

    const [bondBefore, committedBefore] = await Promise.all([
      vault.read<bigint>("bond"),
      vault.read<bigint>("bondCommitted"),
    ]);
    const { opened, resolved, shortfall } = await vault.challengeAndResolve(
      watcher,
      day,
      merchant.slot,
      paid,
    );
    t.diagnostic(
      `challenge gas: ${opened.gasUsed} to present ${paid.length} receipts, ${resolved.gasUsed} to resolve with a proven shortfall (paid from the bond)`,
    );

    // Proven: the shortfall is paid from the bond into the merchant's
    // balance (no transfer, so nothing can refuse it), and the day is held.
    assert.equal(shortfall, pool);
    assert.equal(await vault.read<bigint>("bond"), bondBefore - pool);
    assert.equal(await vault.read<bigint>("bondCommitted"), committedBefore - pool);
    assert.equal(await vault.read<bigint>("totalPenalties"), pool);
    assert.equal(await vault.balanceOf(merchant.slot), pool);
    assert.deepEqual(await vault.read<bigint[]>("presentedOf", [merchant.slot, BigInt(day), 0]), [
      pool,
      pool,
    ]);
    assert.equal(await phaseOf(day), 3, "disputed");
    assert.equal(await vault.read<boolean>("frozen"), true);

    // The thief's credit is never released, even after the window.
    await vault.warp((await vault.chainTime()) + WINDOW + 1n);
    assert.equal(
      await refusal(thief.owner, "release", [BigInt(day), [thief.slot]]),
      "DayNotClosed",
    );
    const thiefBefore = await vault.usdcOf(thief.owner.address);
    await vault.withdraw(thief, pool);
    assert.equal(await vault.usdcOf(thief.owner.address), thiefBefore, "the thief was paid");
    // The same receipts count once per attempt.
    assert.equal(
      await refusal(watcher, "challenge", [BigInt(day), merchant.slot, openings(paid)]),
      "AlreadyPresented",
    );

    // The merchant's own payments are its own on the disputed day: anyone
    // holding the receipts redeems them, and only to its slot.
    for (const p of paid) {
      const r = await vault.send(watcher, "redeem", [p.key, merchant.slot, p.opening!.blinding]);
      assert.equal(r.status, "success");
    }
    assert.equal(await vault.balanceOf(merchant.slot), 2n * pool, "its payments and the shortfall");
    assert.equal(
      await refusal(watcher, "challenge", [BigInt(day), merchant.slot, openings(paid)]),
      "PaymentNotCollected",
      "a redeemed payment is in no pool",
    );
    const before = await vault.usdcOf(merchant.owner.address);
    await vault.withdraw(merchant, 2n * pool);
    assert.equal((await vault.usdcOf(merchant.owner.address)) - before, 2n * pool);

    // Nothing closes while frozen, honest split or not; the bond cannot leave.
    const next = await vault.today();
    const honest = await vault.pay(300_000n, 2, merchant);
    await vault.nextDay();
    await vault.creditAll(next, new Map([[merchant.slot, honest.amount]]));
    assert.equal(await refusal(vault.operator, "closeDay", [BigInt(next)]), "OperatorFrozen");
    assert.equal(
      await refusal(vault.bondOwner, "withdrawBond", [vault.bondOwner.address, 1n]),
      "OperatorFrozen",
    );
    // Only the bond owner resumes, and only with another operator key.
    assert.equal(await refusal(vault.operator, "resume", [watcher.address]), "NotBondOwner");
    assert.equal(
      await refusal(vault.bondOwner, "resume", [vault.operator.address]),
      "BadOperator",
      "the key that wrote the short split",
    );
    assert.equal(
      await refusal(vault.bondOwner, "resume", ["0x0000000000000000000000000000000000000000"]),
      "BadOperator",
    );
    const thiefKey = vault.operator;
    assert.equal((await vault.resumeWith()).status, "success");
    assert.notEqual(vault.operator.address, thiefKey.address);
    // The bond keeps what it paid: nothing comes back from any pool.
    assert.equal(await vault.read<bigint>("bond"), bondBefore - pool);
    assert.equal(await vault.read<bigint>("bondCommitted"), committedBefore - pool);
    assert.equal(await phaseOf(day), 0, "reopened");
    assert.equal(await vault.read<bigint>("dayPool", [BigInt(day)]), 0n, "all of it redeemed");
    assert.equal(await vault.read<bigint>("strayBalance"), 0n);
    // The old key can do nothing more; the new one closes both days.
    assert.equal(await refusal(thiefKey, "closeDay", [BigInt(day)]), "NotOperator");
    await vault.creditAll(day, new Map());
    assert.equal(await vault.close(day), "success");
    await vault.creditAll(next, new Map([[merchant.slot, honest.amount]]));
    assert.equal(await vault.close(next), "success");
    assert.equal((await releaseAfterWindow(next)).status, "success");
    assert.equal(await vault.balanceOf(merchant.slot), honest.amount);
    assert.equal(
      await refusal(watcher, "challenge", [BigInt(next), merchant.slot, openings([honest])]),
      "NotChallengeable",
      "past the window",
    );
  });

  test("an honest day: a challenge with true receipts moves nothing and costs its sender only gas", async (t) => {
    await vault.nextDay();
    const merchant = await newMerchant();
    const other = await newMerchant();
    const day = await vault.today();
    const mine = [await vault.pay(400_000n, 3, merchant), await vault.pay(600_000n, 4, merchant)];
    const theirs = await vault.pay(900_000n, 3, other);
    await vault.nextDay();
    await vault.creditAll(
      day,
      new Map([
        [merchant.slot, 1_000_000n],
        [other.slot, theirs.amount],
      ]),
    );
    assert.equal(
      await refusal(merchant.owner, "challenge", [BigInt(day), merchant.slot, openings(mine)]),
      "NotChallengeable",
      "a day not closed has no split to challenge",
    );
    assert.equal(await vault.close(day), "success");

    const sender = merchant.owner;
    const [bond, vaultHeld, usdcBefore, ethBefore] = await Promise.all([
      vault.read<bigint>("bond"),
      vault.usdcOf(vault.address),
      vault.usdcOf(sender.address),
      vault.client.getBalance({ address: sender.address }),
    ]);
    const { opened, resolved, shortfall } = await vault.challengeAndResolve(
      sender,
      day,
      merchant.slot,
      mine,
    );
    t.diagnostic(
      `challenge gas: ${opened.gasUsed} to present ${mine.length} receipts, ${resolved.gasUsed} to resolve (no shortfall)`,
    );
    assert.equal(shortfall, 0n);
    assert.equal(await vault.read<bigint>("bond"), bond);
    assert.equal(await vault.usdcOf(vault.address), vaultHeld);
    assert.equal(await vault.usdcOf(sender.address), usdcBefore);
    const gas = [opened, resolved].reduce((a, r) => a + r.gasUsed * r.effectiveGasPrice, 0n);
    assert.equal(await vault.client.getBalance({ address: sender.address }), ethBefore - gas);
    assert.equal(await phaseOf(day), 2, "still closed");
    assert.equal(await vault.read<boolean>("frozen"), false);
    assert.equal(await vault.read<boolean>("presented", [mine[0]!.key]), true);

    // After the window both merchants get exactly their split.
    assert.equal((await releaseAfterWindow(day)).status, "success");
    assert.equal(await vault.balanceOf(merchant.slot), 1_000_000n);
    assert.equal(await vault.balanceOf(other.slot), theirs.amount);
  });

  test("no key makes a claim: another slot's payment, a made-up blinding, an unattributed payment, a forged attribution, another day's payment, duplicates and late openings are refused", async () => {
    await vault.nextDay();
    const merchant = await newMerchant();
    const forger = await newMerchant(); // a merchant account of a key holder's own
    const stranger = await vault.someone();
    const earlier = await vault.today();
    const old = await vault.pay(100_000n, 2, merchant);
    await vault.nextDay();
    await vault.creditAll(earlier, new Map([[merchant.slot, old.amount]]));
    assert.equal(await vault.close(earlier), "success");
    const day = await vault.today();
    const a = await vault.pay(500_000n, 0, merchant);
    const b = await vault.pay(700_000n, 1, merchant);
    const unattributed = await vault.pay(800_000n, 2, null);
    // Only the operator's signature attributes: any other key's is refused at collect.
    const forgedKey = privateKeyToAccount(generatePrivateKey());
    await assert.rejects(vault.pay(1n, 3, forger, forgedKey), (e: unknown) => {
      assert.ok(e instanceof assert.AssertionError && e.actual === "reverted");
      return true;
    });
    await vault.nextDay();
    await vault.creditAll(
      day,
      new Map([
        [merchant.slot, a.amount + b.amount],
        [forger.slot, unattributed.amount],
      ]),
    );
    assert.equal(await vault.close(day), "success");
    const bond = await vault.read<bigint>("bond");

    const attempt = (slot: bigint, opened: { key: Hex; blinding: Hex }[], from = stranger) =>
      refusal(from, "challenge", [BigInt(day), slot, opened]);
    // The merchant's payment claimed for the forger's slot, with the
    // merchant's own blinding or the forger's: a payment opens to one slot.
    assert.equal(
      await attempt(forger.slot, [{ key: a.key, blinding: a.opening!.blinding }]),
      "NotTheOpening",
    );
    assert.equal(
      await attempt(forger.slot, [{ key: a.key, blinding: toHex(randomBytes(32)) }]),
      "NotTheOpening",
    );
    // The same for a redemption: no slot but the committed one is ever credited.
    assert.equal(
      await refusal(stranger, "redeem", [a.key, forger.slot, a.opening!.blinding]),
      "NotTheOpening",
    );
    // An unattributed payment opens to no slot; nor does one never collected.
    assert.equal(
      await attempt(forger.slot, [{ key: unattributed.key, blinding: toHex(randomBytes(32)) }]),
      "NotTheOpening",
    );
    assert.equal(
      await attempt(merchant.slot, [
        { key: toHex(randomBytes(32)), blinding: a.opening!.blinding },
      ]),
      "NotTheOpening",
    );
    // A true opening of another day's payment; the same opening twice; none at all.
    assert.equal(await attempt(merchant.slot, openings([old])), "PaymentNotOfDay");
    assert.equal(await attempt(merchant.slot, openings([a, a])), "AlreadyPresented");
    assert.equal(await attempt(merchant.slot, []), "NotChallengeable");
    await vault.challengeAndResolve(stranger, day, merchant.slot, [a]);
    assert.equal(await attempt(merchant.slot, openings([a])), "AlreadyPresented");
    // After the window: too late, the day is released.
    assert.equal((await releaseAfterWindow(day)).status, "success");
    assert.equal(await attempt(merchant.slot, openings([b])), "NotChallengeable");

    // Nothing moved: the bond is whole, and each slot holds its split.
    assert.equal(await vault.read<bigint>("bond"), bond);
    assert.equal(await vault.balanceOf(merchant.slot), a.amount + b.amount);
    assert.equal(await vault.read<boolean>("frozen"), false);
  });

  test("a partial shortfall across two challenges: the bond pays exactly what the split withheld, once; resume waits for open challenges; the reopened day's new split is challengeable with the same receipts", async () => {
    await vault.nextDay();
    const merchant = await newMerchant();
    const other = await newMerchant();
    const thief = await newMerchant();
    const day = await vault.today();
    const paid = [
      await vault.pay(1_000_000n, 0, merchant),
      await vault.pay(2_000_000n, 1, merchant),
      await vault.pay(4_000_000n, 2, merchant),
    ];
    const theirs = await vault.pay(500_000n, 3, other);
    await vault.nextDay();
    // 2.5 of the merchant's 7 go to the thief; the other merchant is shorted too.
    await vault.creditAll(
      day,
      new Map([
        [merchant.slot, 4_500_000n],
        [thief.slot, 2_500_000n + 200_000n],
        [other.slot, theirs.amount - 200_000n],
      ]),
    );
    assert.equal(await vault.close(day), "success");
    const bond = await vault.read<bigint>("bond");
    const watcher = await vault.someone();

    // Two receipts show 3, less than the 4.5 credited: no shortfall yet.
    const first = await vault.challengeAndResolve(watcher, day, merchant.slot, paid.slice(0, 2));
    assert.equal(first.shortfall, 0n);
    // The third makes 7 against 4.5: 2.5 short, paid from the bond.
    const second = await vault.challengeAndResolve(watcher, day, merchant.slot, paid.slice(2));
    assert.equal(second.shortfall, 2_500_000n);
    assert.equal(await vault.read<bigint>("bond"), bond - 2_500_000n);
    assert.equal(await vault.balanceOf(merchant.slot), 2_500_000n);
    assert.equal(await phaseOf(day), 3);

    // The other merchant's receipt, opened against the same (disputed)
    // split while its challenge is open: resume waits for the KMS's answer.
    const opened = await vault.send(watcher, "challenge", [
      BigInt(day),
      other.slot,
      openings([theirs]),
    ]);
    assert.equal(opened.status, "success");
    assert.equal(await refusal(vault.bondOwner, "resume", [watcher.address]), "ChallengesOpen");
    const id = (await vault.read<bigint>("challengeCount")) - 1n;
    const [, , , , , , handle] = await vault.read<unknown[]>("challengeInfo", [id]);
    const { cleartexts, proof } = await vault.fhe.publicDecrypt([handle as Hex]);
    assert.equal(
      (await vault.send(watcher, "resolveChallenge", [id, cleartexts, proof])).status,
      "success",
    );
    assert.equal(await vault.balanceOf(other.slot), 200_000n, "its 0.2 shortfall");
    assert.equal(await vault.read<bigint>("bond"), bond - 2_700_000n);

    // Resumed: the bond keeps its loss; the day reopens for a new split.
    assert.equal((await vault.resumeWith()).status, "success");
    assert.equal(await vault.read<bigint>("bond"), bond - 2_700_000n);
    assert.equal(await vault.read<boolean>("presented", [paid[0]!.key]), false, "a new attempt");
    // The new key shorts the merchant again: the same receipts prove it again.
    await vault.creditAll(
      day,
      new Map([
        [merchant.slot, 6_000_000n],
        [thief.slot, 1_000_000n],
        [other.slot, theirs.amount],
      ]),
    );
    assert.equal(await vault.close(day), "success");
    const again = await vault.challengeAndResolve(watcher, day, merchant.slot, paid);
    assert.equal(again.shortfall, 1_000_000n);
    assert.equal(await vault.read<bigint>("bond"), bond - 3_700_000n);
    assert.equal(await vault.balanceOf(merchant.slot), 3_500_000n);
    assert.equal((await vault.resumeWith()).status, "success");
    // An honest third split: after its window the merchant gets its 7.
    await vault.creditAll(
      day,
      new Map([
        [merchant.slot, 7_000_000n],
        [other.slot, theirs.amount],
      ]),
    );
    assert.equal(await vault.close(day), "success");
    assert.equal(
      (await vault.challengeAndResolve(watcher, day, merchant.slot, paid)).shortfall,
      0n,
    );
    assert.equal((await releaseAfterWindow(day)).status, "success");
    assert.equal(await vault.balanceOf(merchant.slot), 10_500_000n);
    assert.equal(await vault.balanceOf(thief.slot), 0n);
    assert.equal(await vault.read<bigint>("strayBalance"), 0n);
  });

  test("two shortfalls of one slot resolved out of order: the bond pays the larger once, and the smaller still resolves", async () => {
    await vault.nextDay();
    const merchant = await newMerchant();
    const thief = await newMerchant();
    const day = await vault.today();
    const small = await vault.pay(1_000_000n, 0, merchant);
    const large = await vault.pay(2_000_000n, 1, merchant);
    await vault.nextDay();
    await vault.creditAll(
      day,
      new Map([
        [merchant.slot, 500_000n],
        [thief.slot, 2_500_000n],
      ]),
    );
    assert.equal(await vault.close(day), "success");
    const bond = await vault.read<bigint>("bond");
    const watcher = await vault.someone();
    const open = async (paid: CollectedPayment[]) => {
      const r = await vault.send(watcher, "challenge", [
        BigInt(day),
        merchant.slot,
        openings(paid),
      ]);
      assert.equal(r.status, "success");
      return (await vault.read<bigint>("challengeCount")) - 1n;
    };
    const resolve = async (id: bigint) => {
      const [, , , , , , handle] = await vault.read<unknown[]>("challengeInfo", [id]);
      const { cleartexts, proof } = await vault.fhe.publicDecrypt([handle as Hex]);
      return (await vault.send(watcher, "resolveChallenge", [id, cleartexts, proof])).status;
    };
    const first = await open([small]); // 1 against 0.5: 0.5 short
    const second = await open([large]); // 3 against 0.5: 2.5 short
    assert.equal(await resolve(second), "success");
    assert.equal(await vault.read<bigint>("bond"), bond - 2_500_000n);
    assert.equal(await resolve(first), "success", "the smaller, later answer");
    assert.equal(await vault.read<bigint>("bond"), bond - 2_500_000n, "paid once");
    assert.equal(await vault.balanceOf(merchant.slot), 2_500_000n);
    assert.equal((await vault.resumeWith()).status, "success", "nothing left open");
  });
});
