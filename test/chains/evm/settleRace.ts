/**
 * Something changes on-chain between the service's simulation of a settle
 * and the settle's inclusion, the one way a faithful simulation is still
 * wrong: anvil stops mining, the settle is started, and once its
 * transaction is in the pool the test's own transaction (with a far higher
 * tip, so anvil orders it first) goes in, then one block is mined with both.
 */
import { createPublicClient, http, type Hex, type PublicClient } from "viem";

/** A tip anvil's fee ordering puts ahead of anything the service offers. */
export const FRONT_RUN_FEES = {
  maxFeePerGas: 500_000_000_000n,
  maxPriorityFeePerGas: 400_000_000_000n,
} as const;

async function pendingCount(client: PublicClient): Promise<number> {
  const status = await client.request({ method: "txpool_status" as never });
  return Number.parseInt(String((status as { pending: string }).pending), 16);
}

/**
 * Runs `settle` with `front` mined ahead of the transaction it sends, in the
 * same block. When the settle ends without sending anything, `front` is not
 * sent and the settle's answer is returned as it is.
 */
export async function settleRacedBy<T>(
  rpcUrl: string,
  settle: () => Promise<T>,
  front: () => Promise<Hex>,
): Promise<T> {
  const client = createPublicClient({ transport: http(rpcUrl) }) as PublicClient;
  await client.request({ method: "evm_setAutomine" as never, params: [false] as never });
  try {
    const before = await pendingCount(client);
    let ended = false;
    const running = settle().finally(() => (ended = true));
    running.catch(() => undefined);
    // Polls the pool, not a clock: the settle either sends or ends.
    while (!ended && (await pendingCount(client)) <= before) {
      await new Promise((r) => setTimeout(r, 20));
    }
    if (!ended) {
      await front();
      await client.request({ method: "evm_mine" as never });
    }
    return await running;
  } finally {
    await client.request({ method: "evm_setAutomine" as never, params: [true] as never });
  }
}
