/**
 * Enabling confidential settlement derives the merchant's slot from the
 * wallet's signature. A wallet that signs the same message differently on a
 * second try (not every signer is deterministic) resumes the first
 * assignment: the slot comes from the signature recorded first, so an
 * assignment whose answer was lost never yields a second slot.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import secp256k1 from "secp256k1";
import { bytesToHex, hashMessage, hexToBytes, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { startStack, type TestStack } from "../support/stack.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { ConfidentialMerchants } from "../../src/features/confidential/merchants.js";
import type { ConfidentialVault } from "../../src/features/confidential/vaultPort.js";

let stack: TestStack;

before(async () => {
  stack = await startStack({ confidential: true, confidentialWorker: false });
});
after(async () => stack?.stop());

/** A valid signature of `message` made with fresh nonce entropy: another one each call. */
function signWithEntropy(privateKey: Hex, message: string): Hex {
  const { signature, recid } = secp256k1.ecdsaSign(
    hexToBytes(hashMessage(message)),
    hexToBytes(privateKey),
    { data: randomBytes(32) },
  );
  return `${bytesToHex(signature)}${(27 + recid).toString(16)}` as Hex;
}

test("an assignment cut off, resumed with another signature of the same message: the first one's slot", async () => {
  const { db, confidential } = stack.service;
  const vault = confidential.vault!;
  const key = generatePrivateKey();
  const wallet = privateKeyToAccount(key);
  const accountId = (await createAccount(db, "resumer")).id;
  const message = confidential.merchants.enablementMessage(wallet.address, accountId);
  const first = signWithEntropy(key, message);
  const second = signWithEntropy(key, message);
  assert.notEqual(first, second, "two different valid signatures");

  // The first assignment reaches the chain, and its answer is lost.
  const used: Hex[] = [];
  let lose = true;
  const lossy: ConfidentialVault = Object.create(vault) as ConfidentialVault;
  lossy.assignSlot = async (args) => {
    used.push(args.walletSignature);
    const assigned = await vault.assignSlot(args);
    if (lose) {
      lose = false;
      throw new Error("the node's answer was lost");
    }
    return assigned;
  };
  const merchants = new ConfidentialMerchants(db, lossy);
  await assert.rejects(merchants.enable(accountId, wallet.address, first), {
    code: "service_unavailable",
  });
  const enabled = await merchants.enable(accountId, wallet.address, second);
  assert.deepEqual(used, [first, first], "both tries assign from the recorded signature");
  // The first signature's slot, which the chain already holds (no new one).
  const firstSlot = await vault.assignSlot({
    merchant: wallet.address,
    accountRef: accountId,
    walletSignature: first,
  });
  assert.equal(firstSlot.txHash, null, "assigned before");
  assert.equal(enabled.slot, firstSlot.slot);
});

test("the viewer the merchant's tools name at enablement is the slot's on-chain, resumed from the first record, and never changed", async () => {
  const { db, confidential } = stack.service;
  const vault = confidential.vault!;
  const wallet = privateKeyToAccount(generatePrivateKey());
  const viewer = privateKeyToAccount(generatePrivateKey()).address;
  const accountId = (await createAccount(db, "viewer")).id;
  const signature = await wallet.signMessage({
    message: confidential.merchants.enablementMessage(wallet.address, accountId),
  });
  // The wallet itself is refused: the viewer is public and would name the merchant.
  await assert.rejects(
    confidential.merchants.enable(accountId, wallet.address, signature, wallet.address),
    { code: "invalid_request" },
  );

  // The first try records the viewer and its assignment is lost; the
  // retry names none and still assigns with the recorded one.
  const sent: (string | null | undefined)[] = [];
  const lossy: ConfidentialVault = Object.create(vault) as ConfidentialVault;
  lossy.assignSlot = async (args) => {
    sent.push(args.viewer);
    if (sent.length === 1) throw new Error("the node did not answer");
    return vault.assignSlot(args);
  };
  const merchants = new ConfidentialMerchants(db, lossy);
  await assert.rejects(merchants.enable(accountId, wallet.address, signature, viewer), {
    code: "service_unavailable",
  });
  const enabled = await merchants.enable(accountId, wallet.address, signature);
  assert.deepEqual(sent, [viewer, viewer]);
  assert.equal(enabled.viewer, viewer);
  assert.equal(await vault.viewerOf(enabled.slot!), viewer);

  // Another viewer is refused, by the service and by the database.
  const other = privateKeyToAccount(generatePrivateKey()).address;
  await assert.rejects(merchants.enable(accountId, wallet.address, signature, other), {
    code: "conflict",
  });
  await assert.rejects(
    db
      .updateTable("confidential_merchants")
      .set({ viewer_address: other.toLowerCase() } as never)
      .where("account_id", "=", accountId)
      .execute(),
    /viewer is permanent/,
  );
  assert.equal((await merchants.find(accountId))?.viewer, viewer);
});
