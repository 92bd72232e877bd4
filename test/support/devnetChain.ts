/**
 * A devnet EVM chain from a wallet's side: the chain definition viem wants
 * for sending, a wallet client for a key, and ether for a key's gas.
 */
import {
  createTestClient,
  createWalletClient,
  defineChain,
  http,
  type Address,
  type Chain,
  type PrivateKeyAccount,
} from "viem";

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

/** Sets `address`'s ether to `wei` (1 ETH unless told) on the anvil node at `rpcUrl`, for its gas. */
export async function fundGas(rpcUrl: string, address: Address, wei = 10n ** 18n): Promise<void> {
  await createTestClient({ mode: "anvil", transport: http(rpcUrl) }).setBalance({
    address,
    value: wei,
  });
}
