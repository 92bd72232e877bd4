import { test } from "node:test";
import assert from "node:assert/strict";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { recoverTypedDataSigner } from "./nativeSignature.js";

const typed = (from: `0x${string}`) => ({
  domain: {
    name: "USD Coin",
    version: "2",
    chainId: 8453,
    verifyingContract: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913" as const,
  },
  types: {
    TransferWithAuthorization: [
      { name: "from", type: "address" },
      { name: "to", type: "address" },
      { name: "value", type: "uint256" },
      { name: "validAfter", type: "uint256" },
      { name: "validBefore", type: "uint256" },
      { name: "nonce", type: "bytes32" },
    ],
  },
  primaryType: "TransferWithAuthorization" as const,
  message: {
    from,
    to: from,
    value: 1000n,
    validAfter: 0n,
    validBefore: 2n ** 40n,
    nonce: `0x${"ab".repeat(32)}` as const,
  },
});

test("recovers the signer of an EIP-712 authorization, as viem does", async () => {
  const account = privateKeyToAccount(generatePrivateKey());
  const td = typed(account.address);
  const signature = await account.signTypedData(td);
  assert.equal(recoverTypedDataSigner({ ...td, signature }), account.address);
});

test("a changed message recovers someone else; non-ECDSA and malleable signatures give null", async () => {
  const account = privateKeyToAccount(generatePrivateKey());
  const td = typed(account.address);
  const signature = await account.signTypedData(td);
  const other = recoverTypedDataSigner({
    ...td,
    message: { ...td.message, value: 1001n },
    signature,
  });
  assert.notEqual(other, account.address);
  assert.equal(recoverTypedDataSigner({ ...td, signature: "0x1234" }), null);
  // s replaced by n - s (the malleable twin) must not be accepted.
  const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
  const s = BigInt(`0x${signature.slice(66, 130)}`);
  const twin =
    `${signature.slice(0, 66)}${(n - s).toString(16).padStart(64, "0")}${signature.slice(130)}` as `0x${string}`;
  assert.equal(recoverTypedDataSigner({ ...td, signature: twin }), null);
});
