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
 * - The guards a deletion would otherwise leave untested: no release while a
 *   challenge is open or while frozen, no finalization while frozen, no
 *   withdrawal of bond a day holds, `bondCommitted` back to exactly what the
 *   days still held after a resume.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { pad, toHex, type Hex, type PrivateKeyAccount } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
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
  const someone = async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    await vault.testClient.setBalance({ address: account.address, value: 10n ** 18n });
    return account;
  };
  const phaseOf = async (day: number) => (await vault.read<number[]>("dayInfo", [BigInt(day)]))[7];
  const committed = () => vault.read<bigint>("bondCommitted");
  const allSlots = async () => {
    const count = await vault.read<bigint>("slotCount");
    return Array.from({ length: Number(count) }, (_, i) => BigInt(i));
  };
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
  const finalize = async (day: number) => {
    const info = await vault.read<unknown[]>("dayInfo", [BigInt(day)]);
    const { cleartexts, proof } = await vault.fhe.publicDecrypt([info.at(-1) as Hex]);
    return vault.send(vault.operator, "finalizeDay", [BigInt(day), cleartexts, proof]);
  };

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
      (await vault.send(vault.operator, "release", [BigInt(day), await allSlots()])).status,
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
    const watcher = await someone();
    const day = await vault.today();
    const p = await vault.pay(1_000_000n, 0, m);
    await vault.nextDay();
    const base = await committed();
    await vault.creditAll(day, new Map([[m.slot, p.amount]]));
    assert.equal(await vault.close(day), "success");
    const honest = await openChallenge(watcher, day, m.slot, [p]);
    await vault.warp((await vault.chainTime()) + WINDOW + 1n);
    assert.equal(
      await refusal(watcher, "release", [BigInt(day), await allSlots()]),
      "ChallengeWindowOpen",
    );
    await resolve(honest);
    assert.equal(
      (await vault.send(watcher, "release", [BigInt(day), await allSlots()])).status,
      "success",
    );
    assert.equal(await committed(), base - 0n);
    assert.equal(await vault.balanceOf(m.slot), p.amount);
  });

  test("a theft proven while other days are held: nothing releases and nothing finalizes until the resume, which frees exactly the disputed day's share", async () => {
    await vault.nextDay();
    const m = await vault.assignSlot();
    const thief = await vault.assignSlot();
    const watcher = await someone();
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
      await refusal(watcher, "release", [BigInt(d1), await allSlots()]),
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
    // Exactly what d1 and d3 hold remains committed.
    assert.equal(await committed(), base + p1.amount + p3.amount);
    assert.equal((await finalize(d3)).status, "success");
    assert.equal(
      (await vault.send(watcher, "release", [BigInt(d1), await allSlots()])).status,
      "success",
    );
    assert.equal(await committed(), base + p3.amount);
    assert.equal(await phaseOf(d2), 0, "reopened for an honest split");
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
      assert.equal(await refusal(vault.operator, "assignSlot", [commitment]), "TooManySlots");
    } finally {
      await vault.testClient.setStorageAt({
        address: vault.address,
        index: at,
        value: pad(toHex(count), { size: 32 }),
      });
    }
  });
});
