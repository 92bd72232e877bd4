/**
 * The challenge bounty, against the real vault on the devnet's eip155:8453
 * with the fhEVM mock: what a proven shortfall pays its slot from the bond
 * besides the shortfall, so proving any theft costs the operator and never
 * the challenger.
 *
 * - A shortfall proven over two challenges (the first shows none on its
 *   own) pays the shortfall, the base once and the per-opening part for
 *   every opening of both, from the bond, for good: `resume` gives none back.
 * - A challenge that proves no shortfall pays nothing.
 * - A bond with too little beyond what the days hold pays the shortfall in
 *   full and what is left of the bounty.
 * - The service's vault client reports the bounty beside the shortfall
 *   (the day's check, the tab).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { parseEventLogs, type TransactionReceipt } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startDevnetFhevm } from "../../devnet/evm/fhevm.js";
import { createConfidentialVault } from "../../src/chains/evm/confidential/vault.js";
import { startDevnetVault, VAULT_CHAIN_ID, type DevnetVault } from "../chains/evm/devnetVault.js";

const DAY = 86_400n;
const WINDOW = 2n * DAY;
/** The production defaults: 0.10 USDC per proof, 0.005 USDC per opening. */
const BASE = 100_000n;
const PER_OPENING = 5_000n;

describe("the challenge bounty (devnet, fhEVM mock)", () => {
  let vault: DevnetVault;

  before(async () => {
    vault = await startDevnetVault({
      challengeWindowSeconds: Number(WINDOW),
      challengeBounty: { base: BASE, perOpening: PER_OPENING },
    });
  });

  after(async () => {
    await vault?.stop();
  });

  /** The `BountyPaid` events of a receipt, as [openings, amount]. */
  const bounties = (r: TransactionReceipt) =>
    parseEventLogs({ abi: vault.abi, logs: r.logs, eventName: "BountyPaid" }).map((e) => {
      const args = e.args as unknown as { openings: bigint; amount: bigint };
      return [args.openings, args.amount];
    });
  const money = async () => {
    const [bond, committed, penalties, paidBounties] = await Promise.all([
      vault.read<bigint>("bond"),
      vault.read<bigint>("bondCommitted"),
      vault.read<bigint>("totalPenalties"),
      vault.read<bigint>("totalBounties"),
    ]);
    return { bond, committed, penalties, paidBounties };
  };

  test("a shortfall proven over two challenges pays the shortfall, the base once and every opening of both, from the bond, for good", async (t) => {
    assert.equal(await vault.read<bigint>("challengeBountyBase"), BASE);
    assert.equal(await vault.read<bigint>("challengeBountyPerOpening"), PER_OPENING);
    await vault.nextDay();
    const merchant = await vault.assignSlot();
    const thief = await vault.assignSlot();
    const watcher = await vault.someone();
    const day = await vault.today();
    const paid = [
      await vault.pay(400_000n, 0, merchant),
      await vault.pay(300_000n, 1, merchant),
      await vault.pay(10_000n, 2, merchant),
    ];
    const stolen = paid[2]!.amount;
    await vault.nextDay();
    // The key skims the smallest payment: less than the gas of proving it.
    await vault.creditAll(
      day,
      new Map([
        [merchant.slot, paid[0]!.amount + paid[1]!.amount],
        [thief.slot, stolen],
      ]),
    );
    assert.equal(await vault.close(day), "success");
    const start = await money();

    // The first two receipts alone show no shortfall: nothing is paid.
    const first = await vault.challengeAndResolve(watcher, day, merchant.slot, paid.slice(0, 2));
    assert.deepEqual(bounties(first.resolved), []);
    assert.deepEqual(await money(), start, "a challenge that proves nothing pays nothing");
    assert.equal(await vault.balanceOf(merchant.slot), 0n);

    // The third proves it: the shortfall, the base, and all three openings.
    const second = await vault.challengeAndResolve(watcher, day, merchant.slot, paid.slice(2));
    t.diagnostic(
      `challenge gas with the bounty: ${first.opened.gasUsed} to present 2 receipts, ${first.resolved.gasUsed} to resolve with no shortfall; ${second.opened.gasUsed} to present 1 receipt, ${second.resolved.gasUsed} to resolve with a shortfall and its bounty`,
    );
    const bounty = BASE + 3n * PER_OPENING;
    assert.deepEqual(bounties(second.resolved), [[3n, bounty]]);
    const proven = await money();
    assert.equal(proven.bond, start.bond - stolen - bounty);
    assert.equal(proven.committed, start.committed - stolen, "the day's share paid the shortfall");
    assert.equal(proven.penalties, start.penalties + stolen + bounty);
    assert.equal(proven.paidBounties, start.paidBounties + bounty);
    assert.equal(await vault.balanceOf(merchant.slot), stolen + bounty);
    assert.equal(await vault.read<boolean>("frozen"), true);

    // A further proof of the same slot and attempt pays no base and no opening twice.
    const more = await vault.send(watcher, "challenge", [
      BigInt(day),
      merchant.slot,
      [{ key: paid[0]!.key, blinding: paid[0]!.opening!.blinding }],
    ]);
    assert.equal(more.status, "reverted", "each opening counts once per attempt");

    // The merchant's own payments are redeemed on the disputed day; the
    // bounty and the shortfall stay its own, and `resume` refills nothing.
    for (const p of paid) {
      const r = await vault.send(watcher, "redeem", [p.key, merchant.slot, p.opening!.blinding]);
      assert.equal(r.status, "success");
    }
    const nextKey = generatePrivateKey();
    assert.equal((await vault.resumeWith(privateKeyToAccount(nextKey))).status, "success");
    const resumed = await money();
    assert.equal(resumed.bond, proven.bond, "the bond keeps its loss");
    assert.equal(resumed.paidBounties, proven.paidBounties);
    // The service's client reports both, over every attempt of the day (the
    // day's check and the tab read them).
    const dir = mkdtempSync(join(tmpdir(), "bounty-"));
    const service = await createConfidentialVault({
      rpcUrl: vault.rpcUrl,
      chainId: VAULT_CHAIN_ID,
      contractAddress: vault.address,
      operatorKey: nextKey,
      mode: {
        mock: () =>
          startDevnetFhevm({
            rpcUrl: vault.rpcUrl,
            chainId: VAULT_CHAIN_ID,
            cleartextFile: join(dir, "cleartexts.jsonl"),
          }),
      },
    });
    try {
      assert.equal(await service.penaltiesPaid(merchant.slot, day), stolen);
      assert.equal(await service.bountiesPaid(merchant.slot, day), bounty);
      assert.equal(await service.bountiesPaid(thief.slot, day), 0n);
    } finally {
      await service.close();
      rmSync(dir, { recursive: true, force: true });
    }
    const total = 710_000n + stolen + bounty;
    assert.equal(await vault.balanceOf(merchant.slot), total);
    const before = await vault.usdcOf(merchant.owner.address);
    await vault.withdraw(merchant, total);
    assert.equal((await vault.usdcOf(merchant.owner.address)) - before, total);
    // The reopened day closes empty under the new key.
    await vault.creditAll(day, new Map());
    assert.equal(await vault.close(day), "success");
  });

  test("an honest split challenged: no shortfall, no bounty, and the split is released as written", async () => {
    await vault.nextDay();
    const merchant = await vault.assignSlot();
    const day = await vault.today();
    const paid = [await vault.pay(250_000n, 0, merchant), await vault.pay(350_000n, 1, merchant)];
    await vault.nextDay();
    await vault.creditAll(day, new Map([[merchant.slot, 600_000n]]));
    assert.equal(await vault.close(day), "success");
    const start = await money();
    const { resolved } = await vault.challengeAndResolve(merchant.owner, day, merchant.slot, paid);
    assert.deepEqual(bounties(resolved), []);
    assert.deepEqual(await money(), start);
    assert.equal(await vault.balanceOf(merchant.slot), 0n);
    assert.equal(await vault.read<boolean>("frozen"), false);
    const [closedAt] = await vault.read<bigint[]>("dayChallenges", [BigInt(day)]);
    await vault.warp(closedAt! + WINDOW);
    const released = await vault.send(vault.operator, "release", [
      BigInt(day),
      await vault.allSlots(),
    ]);
    assert.equal(released.status, "success");
    assert.equal(await vault.balanceOf(merchant.slot), 600_000n, "its split, nothing more");
  });

  test("a bond with too little beyond the days' shares pays the shortfall in full, then what is left of the bounty", async () => {
    await vault.nextDay();
    const merchant = await vault.assignSlot();
    const thief = await vault.assignSlot();
    const day = await vault.today();
    const paid = [await vault.pay(200_000n, 0, merchant), await vault.pay(100_000n, 1, merchant)];
    await vault.nextDay();
    await vault.creditAll(day, new Map([[thief.slot, 300_000n]]));
    assert.equal(await vault.close(day), "success");
    // The bond owner leaves only 30,000 beyond what the held days reserve,
    // less than the 110,000 bounty due.
    const left = 30_000n;
    const { bond, committed } = await money();
    const out = await vault.send(vault.bondOwner, "withdrawBond", [
      vault.bondOwner.address,
      bond - committed - left,
    ]);
    assert.equal(out.status, "success");
    const start = await money();
    assert.equal(start.bond - start.committed, left);

    const { resolved } = await vault.challengeAndResolve(merchant.owner, day, merchant.slot, paid);
    assert.deepEqual(bounties(resolved), [[2n, left]], "2 openings, 110,000 due, 30,000 paid");
    const proven = await money();
    assert.equal(proven.bond, start.bond - 300_000n - left);
    assert.equal(proven.bond, proven.committed, "nothing beyond the held shares is left");
    assert.equal(proven.paidBounties, start.paidBounties + left);
    assert.equal(await vault.balanceOf(merchant.slot), 300_000n + left);
    assert.equal(await vault.read<bigint>("strayBalance"), 0n, "every unit accounted for");
  });
});
