/**
 * The slot's viewer (the audit's H-1, item 4), against the real vault on the
 * devnet's eip155:8453 with the fhEVM mock: the address the merchant's tools
 * committed at assignment may decrypt every pending credit and balance of
 * its slot, so the merchant learns the credit the vault really holds without
 * the operator or the service.
 *
 * - After a credit, a penalty the bond paid, a resume (the new key's
 *   split) and a release, each handle of the slot's money is the viewer's
 *   to decrypt (the ACL says so, and the KMS answers it), and the decrypted
 *   values are the vault's own: a shorted credit reads 0.
 * - Another slot's viewer may decrypt none of it, and a key that is not the
 *   slot's viewer on-chain is refused before anything is decrypted.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { parseAbi, type Address, type Hex, type PrivateKeyAccount } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { FHEVM_HOST } from "../../devnet/evm/fhevm.js";
import { slotViewer } from "../../src/clients/confidential/viewer.js";
import {
  startDevnetVault,
  type CollectedPayment,
  type DevnetVault,
  type OwnedSlot,
} from "../chains/evm/devnetVault.js";

const DAY = 86_400n;
const WINDOW = 2n * DAY;
const aclAbi = parseAbi([
  "function isAllowed(bytes32 handle, address account) view returns (bool)",
]);

describe("the slot's viewer decrypts its credit and balance (devnet, fhEVM mock)", () => {
  let vault: DevnetVault;

  before(async () => {
    vault = await startDevnetVault({ challengeWindowSeconds: Number(WINDOW) });
  });
  after(async () => {
    await vault?.stop();
  });

  const allowed = (handle: Hex, who: Address) =>
    vault.client.readContract({
      address: FHEVM_HOST.acl,
      abi: aclAbi,
      functionName: "isAllowed",
      args: [handle, who],
    });
  const creditHandle = (s: OwnedSlot, day: number) =>
    vault.read<Hex>("slotDayCredit", [s.slot, BigInt(day)]);
  const balanceHandle = async (s: OwnedSlot) =>
    (await vault.read<[Hex, Hex]>("slotInfo", [s.slot]))[1];
  const viewerOf = (s: OwnedSlot, key: PrivateKeyAccount = s.viewer) =>
    slotViewer({
      client: vault.client,
      fhe: vault.fhe,
      vault: vault.address,
      slot: s.slot,
      viewer: key,
    });
  /** The handle is `owner`'s viewer's to decrypt, and no `stranger`'s viewer's. */
  const onlyViewerOf = async (handle: Hex, owner: OwnedSlot, stranger: OwnedSlot) => {
    assert.notEqual(BigInt(handle), 0n);
    assert.equal(
      await allowed(handle, owner.viewer.address),
      true,
      "the slot's viewer may decrypt it",
    );
    assert.equal(
      await allowed(handle, stranger.viewer.address),
      false,
      "another slot's viewer may not",
    );
    await assert.rejects(
      vault.fhe.userDecrypt(vault.address, [handle], stranger.viewer),
      /not authorized/,
    );
  };
  const challengeAndResolve = async (day: number, s: OwnedSlot, paid: CollectedPayment[]) => {
    const openings = paid.map((p) => ({ key: p.key, blinding: p.opening!.blinding }));
    const opened = await vault.send(s.owner, "challenge", [BigInt(day), s.slot, openings]);
    assert.equal(opened.status, "success");
    const id = (await vault.read<bigint>("challengeCount")) - 1n;
    const info = await vault.read<unknown[]>("challengeInfo", [id]);
    const { cleartexts, proof } = await vault.fhe.publicDecrypt([info.at(-1) as Hex]);
    const resolved = await vault.send(s.owner, "resolveChallenge", [id, cleartexts, proof]);
    assert.equal(resolved.status, "success");
  };

  test("after a credit, a penalty, a resume and a release the slot's viewer decrypts what the vault holds for it, and no other slot's viewer does", async () => {
    await vault.nextDay();
    const merchant = await vault.assignSlot();
    const other = await vault.assignSlot();
    const thief = await vault.assignSlot();
    assert.equal(await vault.read<Address>("viewerOf", [merchant.slot]), merchant.viewer.address);
    const day = await vault.today();
    const paid = [
      await vault.pay(1_250_000n, 0, merchant),
      await vault.pay(2_000_000n, 1, merchant),
    ];
    const theirs = await vault.pay(700_000n, 2, other);
    const pool = paid.reduce((a, p) => a + p.amount, 0n);
    await vault.nextDay();

    // The operator key credits the merchant's payments to a slot of its own.
    await vault.creditAll(
      day,
      new Map([
        [thief.slot, pool],
        [other.slot, theirs.amount],
      ]),
    );
    assert.equal(await vault.close(day), "success");

    // After the credit: the viewer reads the credit the vault holds, 0.
    await onlyViewerOf(await creditHandle(merchant, day), merchant, other);
    await onlyViewerOf(await creditHandle(other, day), other, merchant);
    const mine = await viewerOf(merchant);
    assert.equal(await mine.credit(day), 0n, "the shorted credit, as the vault holds it");
    assert.equal(await (await viewerOf(other)).credit(day), theirs.amount);
    // A key that is not the slot's viewer on-chain is refused up front.
    await assert.rejects(viewerOf(merchant, other.viewer), /viewer on-chain is/);

    // After a penalty: the bond's payment into the balance is the viewer's to read.
    await challengeAndResolve(day, merchant, paid);
    await onlyViewerOf(await balanceHandle(merchant), merchant, other);
    assert.equal(await mine.balance(), pool);

    // After a resume: the new key's split of the reopened day, and its release.
    assert.equal((await vault.resumeWith()).status, "success");
    assert.equal(await mine.credit(day), null, "the disputed attempt's credit is gone");
    await vault.creditAll(
      day,
      new Map([
        [merchant.slot, pool],
        [other.slot, theirs.amount],
      ]),
    );
    assert.equal(await vault.close(day), "success");
    await onlyViewerOf(await creditHandle(merchant, day), merchant, other);
    assert.equal(await mine.credit(day), pool);

    const [closedAt] = await vault.read<bigint[]>("dayChallenges", [BigInt(day)]);
    await vault.warp(closedAt! + WINDOW);
    const slots = [merchant.slot, other.slot, thief.slot];
    assert.equal(
      (await vault.send(vault.operator, "release", [BigInt(day), slots])).status,
      "success",
    );
    await onlyViewerOf(await balanceHandle(merchant), merchant, other);
    await onlyViewerOf(await balanceHandle(other), other, merchant);
    assert.equal(await mine.balance(), 2n * pool, "the penalty and the honest credit");
    assert.equal(await (await viewerOf(other)).balance(), theirs.amount);
    assert.equal(await (await viewerOf(thief)).balance(), 0n);
  });

  test("a slot assigned without a viewer lets no one but the vault and the operator decrypt its credit; one beside it with a viewer lets its viewer", async () => {
    await vault.nextDay();
    const plain = await vault.assignSlot();
    // The same call with no viewer, as an enablement that names none makes it.
    const commitment = `0x${"5a".repeat(32)}` as Hex;
    const sent = await vault.send(vault.operator, "assignSlot", [
      commitment,
      "0x0000000000000000000000000000000000000000",
    ]);
    assert.equal(sent.status, "success");
    const [, slot] = await vault.read<[boolean, bigint]>("slotOf", [commitment]);
    assert.equal(
      await vault.read<Address>("viewerOf", [slot]),
      "0x0000000000000000000000000000000000000000",
    );
    const day = await vault.today();
    await vault.pay(300_000n, 3, plain);
    await vault.nextDay();
    await vault.creditAll(day, new Map([[plain.slot, 300_000n]]));
    assert.equal(await vault.close(day), "success");
    const own = await vault.read<Hex>("slotDayCredit", [plain.slot, BigInt(day)]);
    assert.equal(await allowed(own, plain.viewer.address), true, "a slot with a viewer");
    assert.equal(await (await viewerOf(plain)).credit(day), 300_000n);
    const handle = await vault.read<Hex>("slotDayCredit", [slot, BigInt(day)]);
    assert.equal(await allowed(handle, vault.operator.address), true);
    assert.equal(await allowed(handle, plain.viewer.address), false);
    const stranger = privateKeyToAccount(generatePrivateKey());
    assert.equal(await allowed(handle, stranger.address), false);
  });
});
