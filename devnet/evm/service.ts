/**
 * What the service is given to serve the devnet's EVM chains: the one
 * "running chains → service setup" mapping devnet mode and the test stack
 * share, as each other family's devnet/<family>/service.ts. EVM's devnet is
 * several anvil chains started together (index.ts), and the test stack and
 * devnet mode both run it, so it is not a line of devnet/families.ts: the
 * first chain's facilitator keys sign on every chain, and its payers are the
 * dashboard's.
 */
import type { Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { ChainSetups } from "../../src/chains/index.js";
import type { Devnet } from "./index.js";

export interface EvmSetupOptions {
  /** Puts something (a failing proxy) between the service and each chain: gets its URL, returns the one to use. */
  rpcUrl?: (nodeUrl: string) => Promise<string>;
  /** The chains' block time, when they mine on a clock (the receipt watcher and fee quotes keep to it). */
  blockTimeMs?: number;
  maxGasPriceWei?: bigint;
}

export const evmService = {
  namespace: "eip155",
  /** The setup entry of every chain of the devnet. */
  async setup(devnet: Devnet, opts: EvmSetupOptions = {}): Promise<ChainSetups> {
    const infos = Object.entries(devnet.networks);
    return {
      eip155: {
        networks: await Promise.all(
          infos.map(async ([id, info]) => ({
            id,
            rpcUrls: [opts.rpcUrl ? await opts.rpcUrl(info.rpcUrl) : info.rpcUrl],
            ...(opts.blockTimeMs ? { blockTimeMs: opts.blockTimeMs } : {}),
            ...(opts.maxGasPriceWei !== undefined ? { maxGasPriceWei: opts.maxGasPriceWei } : {}),
          })),
        ),
        privateKeys: (infos[0]?.[1].facilitatorPrivateKeys ?? []) as Hex[],
      },
    };
  },
  /** The first chain's funded payers, with their addresses. */
  payers: (devnet: Devnet) =>
    (Object.values(devnet.networks)[0]?.payerPrivateKeys ?? []).map((k) => ({
      address: privateKeyToAccount(k).address,
      privateKey: k,
    })),
  /** One banner line per chain: the RPC URL and the tokens. */
  banner: (devnet: Devnet) =>
    Object.entries(devnet.networks).map(([network, n]) => ({
      network,
      line: `${n.rpcUrl}   ${Object.entries(n.assets)
        .map(([symbol, address]) => `${symbol} ${address}`)
        .join(", ")}`,
    })),
};
