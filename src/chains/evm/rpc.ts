/**
 * RPC clients for one EVM network. Several URLs are combined with viem's
 * fallback transport, so one provider's outage or rate limit does not stop
 * verification or settlement.
 */
import {
  createPublicClient,
  defineChain,
  fallback,
  http,
  type Chain,
  type PublicClient,
} from "viem";
import type { EvmNetwork } from "../../networks/registry.js";

export function chainFor(network: EvmNetwork, rpcUrls: readonly string[]): Chain {
  return defineChain({
    id: network.chainId,
    name: network.name,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [...rpcUrls] } },
  });
}

export function transportFor(rpcUrls: readonly string[]) {
  const transports = rpcUrls.map((url) =>
    http(url, { batch: false, retryCount: 1, timeout: 10_000 }),
  );
  return transports.length === 1
    ? transports[0]!
    : fallback(transports, { rank: false, retryCount: 1 });
}

export function createEvmPublicClient(
  network: EvmNetwork,
  rpcUrls: readonly string[],
  pollingIntervalMs: number,
): PublicClient {
  return createPublicClient({
    chain: chainFor(network, rpcUrls),
    transport: transportFor(rpcUrls),
    pollingInterval: pollingIntervalMs,
    // One eth_call per read is what every RPC provider serves; multicall
    // batching needs Multicall3, which is not on every devnet.
    batch: { multicall: false },
  });
}
