/**
 * A devnet restarted with a state directory resumes the same chains: the same
 * genesis, the contracts where they were, and balances as the last run left
 * them, so a restart behaves like a real chain's and crash recovery can be
 * tried on `npm start`.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createPublicClient, createWalletClient, erc20Abi, http, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { startDevnet } from "./index.js";

const TO = "0x6161616161616161616161616161616161616161" as Hex;

test("a devnet with a state directory resumes its chain after a restart", async () => {
  const stateDir = mkdtempSync(join(tmpdir(), "devnet-state-"));
  const first = await startDevnet({ blockTimeSeconds: 0, outFile: null, stateDir });
  let genesis: Hex;
  let usdc: Hex;
  try {
    const info = first.networks["eip155:8453"]!;
    usdc = info.assets["USDC"] as Hex;
    const client = createPublicClient({ transport: http(info.rpcUrl) });
    genesis = (await client.getBlock({ blockNumber: 0n })).hash;
    const wallet = createWalletClient({
      account: privateKeyToAccount(info.payerPrivateKeys[0] as Hex),
      transport: http(info.rpcUrl),
    });
    const hash = await wallet.writeContract({
      chain: null,
      address: usdc,
      abi: erc20Abi,
      functionName: "transfer",
      args: [TO, 4321n],
    });
    await client.waitForTransactionReceipt({ hash });
  } finally {
    await first.stop();
  }

  const lines: string[] = [];
  const second = await startDevnet({
    blockTimeSeconds: 0,
    outFile: null,
    stateDir,
    progress: (l) => lines.push(l),
  });
  try {
    const info = second.networks["eip155:8453"]!;
    const client = createPublicClient({ transport: http(info.rpcUrl) });
    assert.equal((await client.getBlock({ blockNumber: 0n })).hash, genesis, "same chain");
    assert.equal(info.assets["USDC"], usdc);
    const balance = await client.readContract({
      address: usdc,
      abi: erc20Abi,
      functionName: "balanceOf",
      args: [TO],
    });
    assert.equal(balance, 4321n, "the transfer made before the restart is still there");
    assert.ok(
      lines.some((l) => l.includes("resumed")),
      lines.join("\n"),
    );
  } finally {
    await second.stop();
  }
});
