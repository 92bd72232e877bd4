/**
 * What the service is given to serve the devnet's EVM chains: the one
 * "running chains → service setup" mapping devnet mode and the test stack
 * share, as each other family's devnet/<family>/service.ts. EVM's devnet is
 * several anvil chains started together (index.ts), and the test stack and
 * devnet mode both run it whatever else they are asked for, so it is
 * `BASE_DEVNET` in devnet/families.ts, not a line of its table: the first
 * chain's facilitator keys sign on every chain, and its payers are the
 * dashboard's. Beside the setup it gives what only EVM has in devnet mode:
 * the batch authorizer's devnet key, the confidential vault with the mock
 * coprocessor, and the devnet's token copies for the dashboard.
 */
import { join } from "node:path";
import type { Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { ChainSetups } from "../../src/chains/index.js";
import type { NetworkDescription } from "../../src/chains/ports.js";
import type { ConfidentialVaultOptions } from "../../src/chains/confidentialPort.js";
import type { Config } from "../../src/config/index.js";
import { findEvmNetwork } from "../../src/chains/evm/networks.js";
import {
  allDevnetNetworkIds,
  resolveDevnetNetworks,
  startDevnet,
  type Devnet,
  type DevnetOptions,
} from "./index.js";
import { PERMIT2_ADDRESS } from "./deploy.js";
import { startDevnetFhevm } from "./fhevm.js";
import { devnetBatchAuthorizerKey } from "./keys.js";

/** The chains a devnet runs when none of this family's is asked for. */
const DEFAULT_NETWORKS = ["eip155:8453"];
/** The chain the confidential vault is deployed on. */
const VAULT_NETWORK = "eip155:8453";

export interface EvmSetupOptions {
  /** Puts something (a failing proxy) between the service and each chain: gets its URL, returns the one to use. */
  rpcUrl?: (nodeUrl: string) => Promise<string>;
  /** The chains' block time, when they mine on a clock (the receipt watcher and fee quotes keep to it). */
  blockTimeMs?: number;
  maxGasPriceWei?: bigint;
}

export const evmService = {
  namespace: "eip155" as const,
  /** The chains the devnet has been given for this family, or its default when none. */
  networks(asked: readonly string[]): string[] {
    const own = asked.filter((id) => id.startsWith("eip155:"));
    return own.length > 0 ? own : [...DEFAULT_NETWORKS];
  },
  /** Every chain the devnet can run (what "all" means). */
  allNetworks: (): string[] => allDevnetNetworkIds(),
  /** Throws, naming the valid ones, when `ids` holds an unknown or repeated chain. */
  checkNetworks(ids: readonly string[]): void {
    resolveDevnetNetworks(ids);
  },
  /** The chain of the confidential vault: `confidential` needs it among the started ones. */
  vaultNetwork: VAULT_NETWORK,
  /** Starts the chains, with the devnet contracts deployed. */
  start: (opts: DevnetOptions): Promise<Devnet> => startDevnet(opts),
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
  /**
   * The same as production configuration variables, for a service started
   * on its own (the chaos run's processes): every chain's RPC URL
   * (`rpcUrls[network]` in place of the node's own: a proxy in front of
   * it), its block time when it mines on a clock, and the first chain's
   * facilitator keys, which sign on every chain.
   */
  env(devnet: Devnet, rpcUrls: Record<string, string> = {}): Record<string, string> {
    const infos = Object.entries(devnet.networks);
    const blockTimeMs = devnet.file.blockTimeSeconds * 1000;
    return {
      EVM_PRIVATE_KEYS: (infos[0]?.[1].facilitatorPrivateKeys ?? []).join(","),
      ...Object.fromEntries(
        infos.flatMap(([id, info]) => {
          const chainId = String(info.chainId);
          return [
            [`EVM_RPC_URLS_${chainId}`, rpcUrls[id] ?? info.rpcUrl],
            ...(blockTimeMs > 0 ? [[`EVM_BLOCK_TIME_MS_${chainId}`, String(blockTimeMs)]] : []),
          ];
        }),
      ),
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
  /**
   * Confidential settlement with the devnet's vault and the mock coprocessor
   * in-process, or undefined when the vault's chain is not running. With
   * `keptDir` (where a kept chain's state lives), the coprocessor's inputs
   * file sits beside the chain, so encrypted inputs stay decryptable across
   * restarts.
   */
  confidential(devnet: Devnet, keptDir?: string): ConfidentialVaultOptions | undefined {
    const chain = devnet.networks[VAULT_NETWORK];
    const vault = chain?.confidential;
    if (!chain || !vault) return undefined;
    const { rpcUrl, chainId } = chain;
    const cleartextFile = keptDir ? join(keptDir, `${chainId}.fhevm-inputs.jsonl`) : undefined;
    return {
      rpcUrl,
      chainId,
      contractAddress: vault.contractAddress,
      operatorKey: vault.operatorPrivateKey,
      mode: {
        mock: () => startDevnetFhevm({ rpcUrl, chainId, cleartextFile }),
      },
    };
  },
  /** The configuration with what devnet mode adds: batch-settlement claims co-signed with a devnet key unless told otherwise. */
  config(config: Config): Config {
    const evm = config.families.eip155;
    return {
      ...config,
      families: {
        ...config.families,
        eip155: {
          ...evm,
          batchAuthorizerKey: evm.batchAuthorizerKey ?? devnetBatchAuthorizerKey(),
        },
      },
    };
  },
  /**
   * The devnet's own token copies, with the decimals of the mainnet token of
   * the same symbol, so the dashboard shows devnet amounts in token units.
   */
  tokens(devnet: Devnet): NetworkDescription[] {
    return Object.entries(devnet.networks).flatMap(([id, info]) => {
      const mainnet = findEvmNetwork(id);
      if (!mainnet) return [];
      const assets = Object.entries(info.assets).flatMap(([symbol, address]) => {
        const decimals = mainnet.assets.find((a) => a.symbol === symbol)?.decimals;
        return decimals === undefined ? [] : [{ id: String(address), symbol, decimals }];
      });
      return [{ id, name: mainnet.name, schemes: mainnet.schemes, assets }];
    });
  },
  /**
   * `npm run devnet`'s summary of the running chains: one line per chain
   * (RPC URL, name, tokens), what Permit2 tokens ask of a payer, and a
   * funded payer (all keys in the devnet file `out`).
   */
  summary(devnet: Devnet, out: string): string[] {
    const lines = Object.entries(devnet.networks).map(([id, info]) => {
      const name = findEvmNetwork(id)?.name ?? id;
      const tokens = Object.entries(info.assets)
        .map(([symbol, address]) => `${symbol} ${address}`)
        .join(", ");
      return `  ${id.padEnd(16)} ${info.rpcUrl.padEnd(24)} ${name}${tokens ? `: ${tokens}` : ""}`;
    });
    const permit2Networks = Object.keys(devnet.networks).filter((id) =>
      findEvmNetwork(id)?.assets.some((a) => a.transferMethod === "permit2"),
    );
    if (permit2Networks.length > 0) {
      lines.push(
        `  Permit2 tokens on ${permit2Networks.join(", ")}: payers approve Permit2 ${PERMIT2_ADDRESS} once`,
      );
    }
    const payerKey = Object.values(devnet.networks)[0]?.payerPrivateKeys[0];
    if (payerKey) {
      lines.push(
        `  funded payer     ${privateKeyToAccount(payerKey).address} (all keys in ${out})`,
      );
    }
    return lines;
  },
};
