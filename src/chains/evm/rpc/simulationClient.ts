/**
 * A view of the public client for the mechanisms' simulations (their
 * `readContract` and `verifyTypedData` at verify and settle): every
 * `eth_call` and `eth_estimateGas` runs as our transaction would, from one of
 * our accounts, with the fee we would pay, against the pending block.
 *
 * A node runs a call without a fee at `tx.gasprice` 0, which no mined
 * transaction has: a payer's code (an ERC-1271 wallet, an EIP-7702
 * delegation) that answers "valid" only at gas price 0 passed every
 * simulation and reverted on-chain at our cost. With the fee set, a
 * simulation sees what the chain will. The pre-send simulation (gasLimits.ts)
 * is the one that decides a broadcast; this one makes verify tell the truth
 * earlier.
 */
import { createPublicClient, custom, toHex, type Hex, type PublicClient } from "viem";
import type { Fees } from "./feeOracle.js";

const SIMULATIONS = new Set(["eth_call", "eth_estimateGas"]);

export function simulationClient(
  client: PublicClient,
  from: () => Hex | undefined,
  fees: () => Promise<Fees>,
): PublicClient {
  return createPublicClient({
    ...(client.chain ? { chain: client.chain } : {}),
    // viem's own cache and batching stay on the client underneath.
    cacheTime: 0,
    transport: custom({
      async request({ method, params }: { method: string; params?: unknown }) {
        if (!SIMULATIONS.has(method) || !Array.isArray(params)) {
          return client.request({ method, params } as never);
        }
        const [tx, block, ...rest] = params as [Record<string, unknown>, unknown, ...unknown[]];
        const priced = "gasPrice" in tx || "maxFeePerGas" in tx;
        const f = priced ? undefined : await fees();
        const sender = tx["from"] ?? from();
        const call = {
          ...tx,
          ...(sender ? { from: sender } : {}),
          ...(f
            ? {
                maxFeePerGas: toHex(f.maxFeePerGas),
                maxPriorityFeePerGas: toHex(f.maxPriorityFeePerGas),
              }
            : {}),
        };
        // A call pinned to a block (a read of history) keeps it; "latest"
        // becomes "pending", where our transaction will run.
        const at = block === undefined || block === "latest" ? "pending" : block;
        return client.request({ method, params: [call, at, ...rest] } as never, {
          retryCount: 0,
        });
      },
    }),
  }) as PublicClient;
}
