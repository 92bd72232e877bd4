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
import type { EvmNetwork } from "../networks.js";
import { createRpcFetch } from "./rpcFetch.js";
import { trackedTransport, type RpcHealth } from "./rpcHealth.js";

export function chainFor(network: EvmNetwork, rpcUrls: readonly string[]): Chain {
  return defineChain({
    id: network.chainId,
    name: network.name,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [...rpcUrls] } },
  });
}

/**
 * `batchSize` > 0 sends the calls made in one tick as JSON-RPC batches of up
 * to that many, to the URLs in `batching` (see rpcBatchProbe.ts).
 */
export interface RpcBatching {
  batchSize: number;
  urls: ReadonlySet<string>;
}

function transportFor(rpcUrls: readonly string[], batching?: RpcBatching) {
  const transports = rpcUrls.map((url) =>
    http(url, {
      batch:
        batching && batching.batchSize > 0 && batching.urls.has(url)
          ? { batchSize: batching.batchSize, wait: 0 }
          : false,
      retryCount: 1,
      timeout: 10_000,
      fetchFn: createRpcFetch(),
      // The fetch above refuses an oversized answer as it arrives (viem's
      // own 10 MiB); viem's check would encode every answer again to count it.
      maxResponseBodySize: false,
    }),
  );
  return transports.length === 1
    ? transports[0]!
    : fallback(transports, { rank: false, retryCount: 1 });
}

export function createEvmPublicClient(
  network: EvmNetwork,
  rpcUrls: readonly string[],
  pollingIntervalMs: number,
  batching?: RpcBatching,
  health?: RpcHealth,
): PublicClient {
  const transport = transportFor(rpcUrls, batching);
  return createPublicClient({
    chain: chainFor(network, rpcUrls),
    transport: health ? trackedTransport(transport, health) : transport,
    pollingInterval: pollingIntervalMs,
    // One eth_call per read is what every RPC provider serves; multicall
    // batching needs Multicall3, which is not on every devnet.
    batch: { multicall: false },
  });
}
