/**
 * The operator bond and the vault's liveness (issue 65), against the real
 * vault on the devnet's eip155:8453 with the fhEVM mock, driven by raw
 * transactions signed with the keys themselves.
 *
 * - A rejected attempt frees the bond share its close took (the audit's
 *   H-2: it used to ratchet `bondCommitted` up until nothing closed).
 * - The operator key cannot refund a payment committed to a slot; it can
 *   return an unattributed one (H-3).
 * - A stranger's returned payments do not count against the bond: a close
 *   needs the bond to cover the day's pool, not what was collected (M-1).
 * - Slots are bounded (M-6).
 * - A proven shortfall holds every day the disputed key closed or was
 *   closing, and the resume reopens them all for the new key (M-2); a
 *   freeze the bond owner leaves unanswered ends after `MAX_FREEZE`, by
 *   anyone, with no operator left (M-8).
 * - Each day's open challenges are listed in storage, so the service never
 *   scans every challenge ever made, nor any log (M-7).
 * - The guards a deletion would otherwise leave untested: no release while a
 *   challenge is open or while frozen, no finalization while frozen, no
 *   withdrawal of bond a day holds, `bondCommitted` back to zero after a
 *   resume (every held day reopened).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { pad, toHex, zeroAddress, type Hex, type PrivateKeyAccount } from "viem";
import { loadArtifacts } from "../../devnet/evm/compile.js";
import { devnetWallet } from "../chains/evm/devnetChain.js";
import {
  startDevnetVault,
  VAULT_CHAIN_ID,
  type CollectedPayment,
  type DevnetVault,
} from "../chains/evm/devnetVault.js";

const DAY = 86_400n;
const WINDOW = 2n * DAY;

describe("the operator bond and the vault's liveness (devnet, fhEVM mock)", () => {
  let vault: DevnetVault;

  before(async () => {
    vault = await startDevnetVault({ challengeWindowSeconds: Number(WINDOW) });
  });

  after(async () => {
    await vault?.stop();
  });

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
  const phaseOf = async (day: number) => (await vault.read<number[]>("dayInfo", [BigInt(day)]))[7];
  const committed = () => vault.read<bigint>("bondCommitted");
  const openChallenge = async (
    from: PrivateKeyAccount,
    day: number,
    slot: bigint,
    paid: CollectedPayment[],
  ) => {
    const r = await vault.send(from, "challenge", [
      BigInt(day),
      slot,
      paid.map((p) => ({ key: p.key, blinding: p.opening!.blinding })),
    ]);
    assert.equal(r.status, "success");
    return (await vault.read<bigint>("challengeCount")) - 1n;
  };
  const resolve = async (id: bigint) => {
    const [, , , , , , handle] = await vault.read<unknown[]>("challengeInfo", [id]);
    const { cleartexts, proof } = await vault.fhe.publicDecrypt([handle as Hex]);
    const r = await vault.send(vault.bondOwner, "resolveChallenge", [id, cleartexts, proof]);
    assert.equal(r.status, "success");
    return r;
  };
  /** Sends `closeDay` and stops: the day stays closing until someone finalizes it. */
  const closeOnly = async (day: number) =>
    (await vault.send(vault.operator, "closeDay", [BigInt(day)])).status;

  test("a rejected attempt frees its share of the bond: rejections never ratchet bondCommitted", async () => {
    await vault.nextDay();
    const m = await vault.assignSlot();
    const day = await vault.today();
    const p = await vault.pay(1_000_000n, 0, m);
    await vault.nextDay();
    const before = await committed();
    for (let i = 0; i < 3; i++) {
      // A wrong sum: the KMS proves it, the attempt is discarded.
      await vault.creditAll(day, new Map([[m.slot, p.amount - 1n]]));
      assert.equal(await vault.close(day), "success", "finalizeDay mined: DayRejected");
      assert.equal(await phaseOf(day), 0, "reopened");
      assert.equal(await committed(), before, `attempt ${i} left its share committed`);
    }
    await vault.creditAll(day, new Map([[m.slot, p.amount]]));
    assert.equal(await vault.close(day), "success");
    assert.equal(await committed(), before + p.amount);
    const [closedAt] = await vault.read<bigint[]>("dayChallenges", [BigInt(day)]);
    await vault.warp(closedAt! + WINDOW);
    assert.equal(
      (await vault.send(vault.operator, "release", [BigInt(day), await vault.allSlots()])).status,
      "success",
    );
    assert.equal(await committed(), before);
    assert.equal(await vault.balanceOf(m.slot), p.amount);
  });

  test("the operator key cannot refund a committed payment, only an unattributed one; a stranger's returned payments do not count against the bond", async () => {
    await vault.nextDay();
    const m = await vault.assignSlot();
    const day = await vault.today();
    const mine = await vault.pay(2_000_000n, 0, m); // the accomplice pays; m serves
    const stray = await vault.pay(50_000_000n, 1, null); // a stranger's capital, unattributed
    const payerBefore = await vault.usdcOf(mine.payer);
    const strangerBefore = await vault.usdcOf(stray.payer);
    await vault.nextDay();
    const r = await vault.send(vault.operator, "returnPayments", [
      BigInt(day),
      [mine.key, stray.key],
    ]);
    assert.equal(r.status, "success");
    assert.equal(await vault.usdcOf(mine.payer), payerBefore, "a committed payment was refunded");
    assert.equal((await vault.usdcOf(stray.payer)) - strangerBefore, stray.amount);
    const [, , , state] = await vault.read<[Hex, bigint, number, number, Hex]>("payment", [
      mine.key,
    ]);
    assert.equal(state, 1, "still collected, still m's");

    // The bond must cover the day's pool (2), not what was collected (52).
    const [bond, held] = await Promise.all([vault.read<bigint>("bond"), committed()]);
    const spare = bond - held - mine.amount;
    assert.equal(
      (await vault.send(vault.bondOwner, "withdrawBond", [vault.bondOwner.address, spare + 1n]))
        .status,
      "success",
    );
    await vault.creditAll(day, new Map([[m.slot, mine.amount]]));
    // One unit short of the pool: no close.
    assert.equal(await refusal(vault.operator, "closeDay", [BigInt(day)]), "BondTooLow");
    const usdcAbi = (await loadArtifacts())["DevnetUSDC"]!.abi;
    const topUp = async (amount: bigint) => {
      const approve = await devnetWallet(
        vault.bondOwner,
        vault.rpcUrl,
        VAULT_CHAIN_ID,
      ).writeContract({
        address: vault.usdc,
        abi: usdcAbi,
        functionName: "approve",
        args: [vault.address, amount],
      });
      await vault.client.waitForTransactionReceipt({ hash: approve });
      assert.equal((await vault.send(vault.bondOwner, "depositBond", [amount])).status, "success");
    };
    await topUp(1n);
    assert.equal(await vault.close(day), "success");
    assert.equal(await committed(), held + mine.amount);
    // The held part is the bond's floor: not one unit more leaves it.
    assert.equal(
      await refusal(vault.bondOwner, "withdrawBond", [vault.bondOwner.address, 1n]),
      "BondTooLow",
    );
    assert.equal(
      await refusal(vault.operator, "withdrawBond", [vault.operator.address, 1n]),
      "NotBondOwner",
    );
    // Top the bond up again for the tests after this one.
    await topUp(spare);
    assert.equal(await vault.read<bigint>("bond"), bond);
  });

  test("a challenge still open holds its day past the window; once decided, the day releases", async () => {
    await vault.nextDay();
    const m = await vault.assignSlot();
    const watcher = await vault.someone();
    const day = await vault.today();
    const p = await vault.pay(1_000_000n, 0, m);
    await vault.nextDay();
    const base = await committed();
    await vault.creditAll(day, new Map([[m.slot, p.amount]]));
    assert.equal(await vault.close(day), "success");
    const honest = await openChallenge(watcher, day, m.slot, [p]);
    await vault.warp((await vault.chainTime()) + WINDOW + 1n);
    assert.equal(
      await refusal(watcher, "release", [BigInt(day), await vault.allSlots()]),
      "ChallengeWindowOpen",
    );
    await resolve(honest);
    assert.equal(
      (await vault.send(watcher, "release", [BigInt(day), await vault.allSlots()])).status,
      "success",
    );
    assert.equal(await committed(), base - 0n);
    assert.equal(await vault.balanceOf(m.slot), p.amount);
  });

  test("open challenges are kept per day in storage: whoever submits the KMS's answers reads that day's ids, and a resolved one leaves the list", async () => {
    await vault.nextDay();
    const m = await vault.assignSlot();
    const watcher = await vault.someone();
    const d1 = await vault.today();
    const p1 = await vault.pay(1_000_000n, 0, m);
    const q1 = await vault.pay(400_000n, 1, m);
    await vault.nextDay();
    const d2 = await vault.today();
    const p2 = await vault.pay(600_000n, 2, m);
    await vault.nextDay();
    await vault.creditAll(d1, new Map([[m.slot, p1.amount + q1.amount]]));
    assert.equal(await vault.close(d1), "success");
    await vault.creditAll(d2, new Map([[m.slot, p2.amount]]));
    assert.equal(await vault.close(d2), "success");
    const a = await openChallenge(watcher, d1, m.slot, [p1]);
    const b = await openChallenge(watcher, d2, m.slot, [p2]);
    const c = await openChallenge(watcher, d1, m.slot, [q1]);
    const openOf = async (day: number) =>
      [...(await vault.read<readonly bigint[]>("openChallengeIds", [BigInt(day)]))].sort();
    assert.deepEqual(await openOf(d1), [a, c]);
    assert.deepEqual(await openOf(d2), [b]);
    await resolve(a);
    assert.deepEqual(await openOf(d1), [c]);
    await resolve(c);
    await resolve(b);
    assert.deepEqual(await openOf(d1), []);
    assert.deepEqual(await openOf(d2), []);
    assert.equal(await vault.read<boolean>("frozen"), false, "honest splits");
  });

  test("a theft proven while other days are held: nothing releases or finalizes during the freeze, and the resume reopens every day closed or closing under the disputed key", async () => {
    await vault.nextDay();
    const m = await vault.assignSlot();
    const thief = await vault.assignSlot();
    const watcher = await vault.someone();
    const d1 = await vault.today();
    const p1 = await vault.pay(1_000_000n, 0, m);
    await vault.nextDay();
    const d2 = await vault.today();
    const p2 = await vault.pay(3_000_000n, 1, m);
    await vault.nextDay();
    const d3 = await vault.today();
    const p3 = await vault.pay(500_000n, 2, m);
    await vault.nextDay();
    const base = await committed();
    await vault.creditAll(d1, new Map([[m.slot, p1.amount]]));
    assert.equal(await vault.close(d1), "success");
    await vault.creditAll(d2, new Map([[thief.slot, p2.amount]]));
    assert.equal(await vault.close(d2), "success");
    await vault.creditAll(d3, new Map([[m.slot, p3.amount]]));
    assert.equal(await closeOnly(d3), "success");
    assert.equal(
      await refusal(watcher, "challenge", [
        BigInt(d3),
        m.slot,
        [{ key: p3.key, blinding: p3.opening!.blinding }],
      ]),
      "NotChallengeable",
      "a closing day",
    );

    const theft = await openChallenge(watcher, d2, m.slot, [p2]);
    await resolve(theft);
    assert.equal(await vault.read<boolean>("frozen"), true);
    assert.equal(await committed(), base + p1.amount + p3.amount, "d2's share paid the shortfall");
    // d1's window ends during the freeze: it is not released meanwhile.
    await vault.warp((await vault.chainTime()) + WINDOW + 1n);
    assert.equal(
      await refusal(watcher, "release", [BigInt(d1), await vault.allSlots()]),
      "OperatorFrozen",
    );
    // d3 was closing: its proof cannot be submitted while frozen.
    const [, , , , , , , , matches] = await vault.read<unknown[]>("dayInfo", [BigInt(d3)]);
    const { cleartexts, proof } = await vault.fhe.publicDecrypt([matches as Hex]);
    assert.equal(
      await refusal(watcher, "finalizeDay", [BigInt(d3), cleartexts, proof]),
      "OperatorFrozen",
    );

    assert.equal((await vault.resumeWith()).status, "success");
    // d1 and d3 were split by the key the theft was proven against: neither
    // its closed split nor its closing one stands. Every held day reopens,
    // and the bond holds nothing for them any more.
    for (const day of [d1, d2, d3]) assert.equal(await phaseOf(day), 0, `day ${day} reopened`);
    // So did any other day still held under that key: none holds the bond now.
    assert.equal(await committed(), 0n);
    assert.deepEqual(await vault.read<bigint[]>("heldDays"), []);
    assert.equal(
      await refusal(watcher, "release", [BigInt(d1), await vault.allSlots()]),
      "DayNotClosed",
    );
    assert.equal(
      await refusal(watcher, "finalizeDay", [BigInt(d3), cleartexts, proof]),
      "DayNotClosing",
    );
    // The new operator key splits d1 again, honestly; it closes and, after its window, releases.
    await vault.creditAll(d1, new Map([[m.slot, p1.amount]]));
    assert.equal(await vault.close(d1), "success");
    const [closedAt] = await vault.read<bigint[]>("dayChallenges", [BigInt(d1)]);
    await vault.warp(closedAt! + WINDOW);
    const before = await vault.balanceOf(m.slot);
    assert.equal(
      (await vault.send(watcher, "release", [BigInt(d1), await vault.allSlots()])).status,
      "success",
    );
    assert.equal((await vault.balanceOf(m.slot)) - before, p1.amount);
  });

  test("a freeze is bounded: after MAX_FREEZE anyone ends it, the held days reopen with no operator, and every payment is redeemed by its opening; the bond owner may name an operator later, never the disputed key", async () => {
    await vault.nextDay();
    const m = await vault.assignSlot();
    const thief = await vault.assignSlot();
    const watcher = await vault.someone();
    const d1 = await vault.today();
    const p1 = await vault.pay(2_000_000n, 0, m);
    await vault.nextDay();
    await vault.creditAll(d1, new Map([[thief.slot, p1.amount]]));
    assert.equal(await vault.close(d1), "success");
    await resolve(await openChallenge(watcher, d1, m.slot, [p1]));
    assert.equal(await vault.read<boolean>("frozen"), true);
    const disputed = vault.operator;
    // A payment made during the freeze.
    const d2 = await vault.today();
    const p2 = await vault.pay(700_000n, 1, m);

    const [limit, frozenAt] = await Promise.all([
      vault.read<bigint>("MAX_FREEZE"),
      vault.read<bigint>("frozenAt"),
    ]);
    assert.equal(limit, 14n * DAY);
    assert.equal(await refusal(watcher, "endFreeze", []), "FreezeNotOver");
    await vault.warp(frozenAt + limit);
    assert.equal((await vault.send(watcher, "endFreeze", [])).status, "success");
    assert.equal(await vault.read<boolean>("frozen"), false);
    assert.equal(await vault.read<Hex>("operator"), "0x0000000000000000000000000000000000000000");
    assert.equal(await phaseOf(d1), 0);
    assert.deepEqual(await vault.read<bigint[]>("heldDays"), []);
    // Nobody holds the operator key: the disputed key assigns, credits and closes nothing.
    assert.equal(await refusal(disputed, "closeDay", [BigInt(d2)]), "NotOperator");
    assert.equal(
      await refusal(disputed, "assignSlot", [toHex(new Uint8Array(32).fill(9)), zeroAddress]),
      "NotOperator",
    );
    // Each payment is its merchant's by its opening, whoever sends it. (Its
    // balance handle is the vault's and, after a withdrawal, the merchant's:
    // with no operator, no key of ours may decrypt it, so the ledger says it.)
    const credited = await vault.read<bigint>("totalCredited");
    for (const p of [p1, p2]) {
      const r = await vault.send(watcher, "redeem", [p.key, m.slot, p.opening!.blinding]);
      assert.equal(r.status, "success", `day ${p === p1 ? d1 : d2}'s payment redeemed`);
      const [, , , state] = await vault.read<[Hex, bigint, number, number, Hex]>("payment", [
        p.key,
      ]);
      assert.equal(state, 2, "redeemed");
    }
    assert.equal((await vault.read<bigint>("totalCredited")) - credited, p1.amount + p2.amount);
    assert.equal(await refusal(watcher, "endFreeze", []), "NotFrozen");
    // The bond owner names an operator again: never zero, never the disputed key.
    assert.equal(
      await refusal(vault.bondOwner, "resume", ["0x0000000000000000000000000000000000000000"]),
      "BadOperator",
    );
    assert.equal(await refusal(vault.bondOwner, "resume", [disputed.address]), "BadOperator");
    assert.equal(await refusal(watcher, "resume", [watcher.address]), "NotBondOwner");
    assert.equal((await vault.resumeWith()).status, "success");
  });

  test("slots are bounded: the operator key cannot make every close infeasible", async () => {
    const max = await vault.read<bigint>("MAX_SLOTS");
    assert.equal(max, 4096n);
    // slotCount is storage slot 3 (after the initialized flag and asset,
    // the operator and the deployment block); set it to the bound.
    const count = await vault.read<bigint>("slotCount");
    const at = pad(toHex(3), { size: 32 });
    assert.equal(
      BigInt((await vault.client.getStorageAt({ address: vault.address, slot: at })) ?? "0x0"),
      count,
    );
    await vault.testClient.setStorageAt({
      address: vault.address,
      index: at,
      value: pad(toHex(max), { size: 32 }),
    });
    try {
      const commitment = toHex(new Uint8Array(32).fill(7));
      assert.equal(
        await refusal(vault.operator, "assignSlot", [commitment, zeroAddress]),
        "TooManySlots",
      );
    } finally {
      await vault.testClient.setStorageAt({
        address: vault.address,
        index: at,
        value: pad(toHex(count), { size: 32 }),
      });
    }
  });
});
