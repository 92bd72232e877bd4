/**
 * A devnet EVM chain from a wallet's side: the chain definition viem wants
 * for sending, a wallet client for a key, a key's ether, a token transfer
 * from a devnet payer, and a new payer holding a token but no ether (the
 * payer gas sponsoring is for).
 */
import assert from "node:assert/strict";
import {
  createPublicClient,
  createTestClient,
  createWalletClient,
  defineChain,
  erc20Abi,
  http,
  type Address,
  type Chain,
  type PrivateKeyAccount,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { TestStack } from "../../support/stack.js";

/** A viem chain for one of the devnet's EVM chains, served at `rpcUrl`. */
export function devnetChain(chainId: number, rpcUrl: string): Chain {
  return defineChain({
    id: chainId,
    name: `devnet ${chainId}`,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
}

/** A wallet client that sends as `account` on the devnet chain `chainId` at `rpcUrl`. */
export function devnetWallet(account: PrivateKeyAccount, rpcUrl: string, chainId: number) {
  return createWalletClient({
    chain: devnetChain(chainId, rpcUrl),
    transport: http(rpcUrl),
    account,
  });
}

/** Sets `address`'s ether to `wei` on the anvil node at `rpcUrl` (for its gas, or none at all). */
export async function setEtherBalance(
  rpcUrl: string,
  address: Address,
  wei: bigint,
): Promise<void> {
  await createTestClient({ mode: "anvil", transport: http(rpcUrl) }).setBalance({
    address,
    value: wei,
  });
}

/** Sends `amount` of `token` to `to` from the stack's first devnet payer; resolves once it is mined. */
export async function transferFromDevnetPayer(
  stack: TestStack,
  token: Address,
  to: Address,
  amount: bigint,
): Promise<void> {
  const funder = privateKeyToAccount(stack.payerKeys[0]!);
  const chainId = Number(stack.network.split(":")[1]);
  const hash = await devnetWallet(funder, stack.rpcUrl, chainId).writeContract({
    address: token,
    abi: erc20Abi,
    functionName: "transfer",
    args: [to, amount],
  });
  const client = createPublicClient({ transport: http(stack.rpcUrl) });
  assert.equal((await client.waitForTransactionReceipt({ hash })).status, "success");
}

/**
 * A brand-new payer holding `amount` of `token` (sent by the stack's first
 * devnet payer) and not a wei of ether: it has approved nothing either.
 */
export async function newPayerWithoutGas(
  stack: TestStack,
  token: Address,
  amount: bigint,
): Promise<PrivateKeyAccount> {
  const payer = privateKeyToAccount(generatePrivateKey());
  await transferFromDevnetPayer(stack, token, payer.address, amount);
  await setEtherBalance(stack.rpcUrl, payer.address, 0n);
  return payer;
}
