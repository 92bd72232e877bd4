import { test } from "node:test";
import assert from "node:assert/strict";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { createNativeTransactionSigner } from "./nativeTransactionSigner.js";

test("native signing produces exactly viem's signed transaction", async () => {
  for (let i = 0; i < 5; i++) {
    const key = generatePrivateKey();
    const tx = {
      chainId: 8453,
      type: "eip1559" as const,
      to: privateKeyToAccount(generatePrivateKey()).address,
      data: `0x${"cd".repeat(100 + i)}` as const,
      gas: 90_000n + BigInt(i),
      nonce: i,
      maxFeePerGas: 2_000_000_000n,
      maxPriorityFeePerGas: 1_000_000n,
    };
    assert.equal(
      createNativeTransactionSigner(key)(tx),
      await privateKeyToAccount(key).signTransaction(tx),
    );
  }
});
