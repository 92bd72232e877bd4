/**
 * An EVM chain's own ceiling, measured on the bench's chain with the
 * service idle: plain ERC-20 transfers from the service's own signers at
 * the settle run's concurrency. Settled over ceiling says how much of what
 * the chain takes a second the service turns into settlements, a figure
 * that travels between machines better than either rate alone. Used by
 * `npm run bench:trees` and by the EVM side-by-side run's last phase.
 */
import { createPublicClient, createWalletClient, erc20Abi, http, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";

/**
 * Plain ERC-20 transfers of the chain's USDC from the service's own
 * signers, `concurrency` in flight, each signer's nonces in order: what
 * the chain and its RPC include a second when nothing else is asked of
 * them.
 */
export async function chainCeiling(
  rpcUrl: string,
  usdc: Hex,
  signerKeys: Hex[],
  count: number,
  concurrency: number,
): Promise<number> {
  const client = createPublicClient({ transport: http(rpcUrl) });
  const signers = signerKeys.map((k) => {
    const account = privateKeyToAccount(k);
    return { account, wallet: createWalletClient({ account, transport: http(rpcUrl) }) };
  });
  const nonces = await Promise.all(
    signers.map((s) =>
      client.getTransactionCount({ address: s.account.address, blockTag: "pending" }),
    ),
  );
  const gasPrice = (await client.getGasPrice()) * 2n;
  const started = performance.now();
  let next = 0;
  const hashes: Hex[] = [];
  const worker = async () => {
    for (let i = next++; i < count; i = next++) {
      const s = i % signers.length;
      const nonce = nonces[s]!++;
      const hash = await signers[s]!.wallet.writeContract({
        chain: null,
        address: usdc,
        abi: erc20Abi,
        functionName: "transfer",
        args: [signers[s]!.account.address, 0n],
        nonce,
        gas: 100_000n,
        gasPrice,
      });
      await client.waitForTransactionReceipt({ hash, pollingInterval: 250 });
      hashes.push(hash);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return hashes.length / ((performance.now() - started) / 1000);
}
