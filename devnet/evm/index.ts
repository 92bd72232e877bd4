/**
 * Local chains for development and tests: one anvil node per network, with
 * the network's real chain id, the devnet token contracts at the canonical
 * token addresses, and funded payer and facilitator accounts.
 *
 * Invariants:
 *   - Keys are deterministic (see keys.ts) and identical on every network, so
 *     one payer address is funded everywhere.
 *   - `startDevnet` either returns a fully deployed devnet or stops every node
 *     it started and throws: a failed start leaves no anvil behind.
 *   - The devnet file is written only after every network is ready, so its
 *     existence means "usable".
 */
import { EVM_NETWORKS, findEvmNetwork, type EvmNetwork } from "../../src/chains/evm/networks.js";
import { startAnvil, type AnvilNode } from "./anvil.js";
import { loadArtifacts } from "./compile.js";
import { deployNetwork } from "./deploy.js";
import {
  CONFIDENTIAL_NETWORK_ID,
  placeConfidentialVault,
  type ChallengeBounty,
} from "./confidentialVault.js";
import {
  DEFAULT_DEVNET_FILE,
  writeDevnetFile,
  type DevnetFile,
  type DevnetNetworkInfo,
} from "../devnetFile.js";
import { devnetFacilitatorKeys, devnetPayerKeys } from "./keys.js";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** Where a network's kept chain lives, and what was deployed on it, if anything. */
function keptChain(stateDir: string, chainId: number) {
  mkdirSync(stateDir, { recursive: true });
  const stateFile = join(stateDir, `${chainId}.anvil.json`);
  const infoFile = join(stateDir, `${chainId}.network.json`);
  const info =
    existsSync(stateFile) && existsSync(infoFile)
      ? (JSON.parse(readFileSync(infoFile, "utf8")) as DevnetNetworkInfo)
      : undefined;
  return { stateFile, infoFile, info };
}

/**
 * The network as deployed on a kept chain, when the chain really holds it
 * (the token has code) and it was made for the same keys; otherwise
 * undefined, and the caller deploys again.
 */
async function resumedNetwork(
  rpcUrl: string,
  info: DevnetNetworkInfo,
  payerKeys: readonly string[],
  facilitatorKeys: readonly string[],
): Promise<DevnetNetworkInfo | undefined> {
  const sameKeys =
    JSON.stringify(info.payerPrivateKeys) === JSON.stringify(payerKeys) &&
    JSON.stringify(info.facilitatorPrivateKeys) === JSON.stringify(facilitatorKeys);
  const token = Object.values(info.assets)[0];
  if (!sameKeys || !token) return undefined;
  const res = await fetch(rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "eth_getCode",
      params: [token, "latest"],
    }),
  });
  const code = ((await res.json()) as { result?: string }).result;
  return code && code !== "0x" ? { ...info, rpcUrl } : undefined;
}

export { readDevnetFile, updateDevnetFile, writeDevnetFile } from "../devnetFile.js";
export type { DevnetFile } from "../devnetFile.js";

export interface DevnetOptions {
  /** CAIP-2 ids; default `["eip155:8453"]`. The caller expands "all" (see allDevnetNetworkIds). */
  networks?: string[];
  /** Seconds per block; 0 = one block per transaction. Default 1. */
  blockTimeSeconds?: number;
  /** Funded payer keys. Default 5. */
  payers?: number;
  /** Facilitator signer keys. Default 4. */
  facilitators?: number;
  /** Where to write the devnet file; null writes none. Default `.devnet/devnet.json`. */
  outFile?: string | null;
  /** Atomic token units minted to each payer. Default 1,000,000 whole tokens. */
  payerTokenBalance?: bigint;
  /**
   * The confidential vault's challenge window in seconds: how long after a
   * day closes its merchants may challenge its split. Default 0 (released at
   * once); tests of the challenge set one.
   */
  confidentialChallengeWindowSeconds?: number;
  /**
   * The confidential vault's challenge bounty, USDC base units. Default none
   * (0 and 0); tests of the bounty set one.
   */
  confidentialChallengeBounty?: ChallengeBounty;
  /** Receives one line per step ("starting anvil for …"). Default: silent. */
  progress?: (line: string) => void;
  /**
   * Keep each chain here across restarts (anvil state files), as a real
   * chain outlives the service: a restart resumes the same chains, so
   * settlements recorded before it can be reconciled against them. Default:
   * none (a fresh chain every start, as tests want).
   */
  stateDir?: string;
}

export interface Devnet {
  /** By CAIP-2 id; the same objects as `file.networks`. */
  networks: Record<string, DevnetNetworkInfo>;
  file: DevnetFile;
  /** Where the file was written, or null. */
  outFile: string | null;
  /** Stops every anvil node. Safe to call more than once. */
  stop(): Promise<void>;
}

/**
 * What "all" means: every network in the registry. Each transfer method has a
 * devnet contract (EIP-3009 tokens: DevnetUSDC; Permit2 tokens such as USDG:
 * DevnetPlainToken beside Permit2 and the x402 exact proxy). The service's
 * DEVNET_NETWORKS=all uses the same rule (src/config).
 */
export function allDevnetNetworkIds(): string[] {
  return EVM_NETWORKS.map((n) => n.id);
}

/** Resolves CAIP-2 ids, failing with the list of valid ones. */
export function resolveDevnetNetworks(ids: readonly string[]): EvmNetwork[] {
  if (ids.length === 0) throw new Error("no devnet networks given");
  const unknown = ids.filter((id) => !findEvmNetwork(id));
  if (unknown.length > 0) {
    throw new Error(
      `unknown network ${unknown.map((id) => `"${id}"`).join(", ")}; valid: ${EVM_NETWORKS.map((n) => n.id).join(", ")} (or "all")`,
    );
  }
  if (new Set(ids).size !== ids.length) throw new Error(`duplicate network in ${ids.join(",")}`);
  return ids.map((id) => findEvmNetwork(id)!);
}

export async function startDevnet(opts: DevnetOptions = {}): Promise<Devnet> {
  const networks = resolveDevnetNetworks(opts.networks ?? ["eip155:8453"]);
  const blockTimeSeconds = opts.blockTimeSeconds ?? 1;
  const payerKeys = devnetPayerKeys(opts.payers ?? 5);
  const facilitatorKeys = devnetFacilitatorKeys(opts.facilitators ?? 4);
  const outFile = opts.outFile === undefined ? DEFAULT_DEVNET_FILE : opts.outFile;
  const say = opts.progress ?? (() => undefined);

  // Compiling (cold: seconds) overlaps with the nodes starting.
  const artifacts = loadArtifacts();
  artifacts.catch(() => undefined); // awaited below; never an unhandled rejection
  const nodes: AnvilNode[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(nodes.map((n) => n.stop()));
  };

  const started = await Promise.allSettled(
    networks.map(async (network): Promise<[string, DevnetNetworkInfo]> => {
      const kept = opts.stateDir ? keptChain(opts.stateDir, network.chainId) : undefined;
      say(`${kept?.info ? "resuming" : "starting"} anvil for ${network.id} (${network.name})…`);
      const node = await startAnvil({
        chainId: network.chainId,
        blockTimeSeconds,
        ...(kept ? { stateFile: kept.stateFile } : {}),
      });
      nodes.push(node);
      try {
        const resumed = kept?.info
          ? await resumedNetwork(node.rpcUrl, kept.info, payerKeys, facilitatorKeys)
          : undefined;
        if (resumed) {
          say(`${network.id}: resumed the kept chain (${kept!.stateFile})`);
          // A chain kept from before the vault existed gets it now.
          const usdc = resumed.assets["USDC"];
          if (network.id === CONFIDENTIAL_NETWORK_ID && !resumed.confidential && usdc) {
            resumed.confidential = await placeConfidentialVault({
              rpcUrl: node.rpcUrl,
              chainId: network.chainId,
              artifacts: await artifacts,
              usdc,
            });
            writeFileSync(kept!.infoFile, JSON.stringify(resumed, null, 2));
          }
          return [network.id, resumed];
        }
        const deployed = await deployNetwork({
          network,
          rpcUrl: node.rpcUrl,
          artifacts: await artifacts,
          payerKeys,
          facilitatorKeys,
          ...(opts.payerTokenBalance === undefined
            ? {}
            : { payerTokenBalance: opts.payerTokenBalance }),
          ...(opts.confidentialChallengeWindowSeconds === undefined
            ? {}
            : { confidentialChallengeWindowSeconds: opts.confidentialChallengeWindowSeconds }),
          ...(opts.confidentialChallengeBounty === undefined
            ? {}
            : { confidentialChallengeBounty: opts.confidentialChallengeBounty }),
        });
        for (const [symbol, address] of Object.entries(deployed.assets)) {
          say(`${network.id}: deployed ${symbol} at ${address}`);
        }
        if (deployed.confidential) {
          say(
            `${network.id}: placed the confidential settlement vault at ${deployed.confidential.contractAddress}`,
          );
        }
        const info: DevnetNetworkInfo = {
          rpcUrl: node.rpcUrl,
          chainId: network.chainId,
          assets: deployed.assets,
          payerPrivateKeys: [...payerKeys],
          facilitatorPrivateKeys: [...facilitatorKeys],
          ...(deployed.confidential ? { confidential: deployed.confidential } : {}),
        };
        if (kept) writeFileSync(kept.infoFile, JSON.stringify(info, null, 2));
        return [network.id, info];
      } catch (e) {
        throw new Error(`devnet ${network.id}: ${e instanceof Error ? e.message : String(e)}`, {
          cause: e,
        });
      }
    }),
  );
  // allSettled, not all: every start has finished (or failed) here, so a node
  // still starting cannot be missed by the cleanup and leak.
  const failure = started.find((r) => r.status === "rejected");
  if (failure) {
    await stop();
    throw failure.reason;
  }

  const file: DevnetFile = {
    version: 1,
    startedAt: new Date().toISOString(),
    blockTimeSeconds,
    networks: Object.fromEntries(
      started.flatMap((r) => (r.status === "fulfilled" ? [r.value] : [])),
    ),
  };
  if (outFile) {
    try {
      await writeDevnetFile(outFile, file);
    } catch (e) {
      await stop();
      throw e;
    }
    say(`wrote ${outFile}`);
  }
  let stopping: Promise<void> | undefined;
  return {
    networks: file.networks,
    file,
    outFile,
    stop: () => (stopping ??= stop()),
  };
}
