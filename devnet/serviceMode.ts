/**
 * Devnet mode: what `npm start` does with no configuration. The service
 * loads this module (and with it the compiler and anvil) only in devnet
 * mode, by a dynamic import, so a production install needs neither. It starts local
 * chains in-process, makes sure an account and an API key exist, and writes
 * `facilitatorUrl` and `apiKey` into the devnet file so a script can drive the
 * whole flow from that file alone.
 */
import { join } from "node:path";
import type { Hex } from "viem";
import { startDevnet, readDevnetFile, updateDevnetFile, type Devnet } from "./index.js";
import { addDevnetNetwork } from "./devnetFile.js";
import { SOLANA_MAINNET, startSolanaDevnet, type RunningSolana } from "./svm/index.js";
import { XRPL_MAINNET, startXrplLedger, type RunningXrpl } from "./xrpl/index.js";
import { NEAR_MAINNET, startNearLedger, type RunningNear } from "./near/index.js";
import { STARKNET_MAINNET, startStarknetLedger, type RunningStarknet } from "./starknet/index.js";
import type { Config } from "../src/config/index.js";
import type { ChainSetup } from "../src/app.js";
import type { Db } from "../src/storage/db.js";
import type { ApiKeyAuthenticator } from "../src/features/keys/authenticator.js";
import { createAccount, findAccountByName } from "../src/features/accounts/accounts.js";
import { createApiKey } from "../src/features/keys/apiKeys.js";
import type { KnownAsset } from "../src/features/dashboard/assets.js";
import { findEvmNetwork } from "../src/networks/registry.js";
export { devnetBatchAuthorizerKey } from "./keys.js";
import { startLocalIdentityProviders, type LocalIdentityProviders } from "./identityProviders.js";

/** The Vite dev server's origin (`npm run dashboard:dev`), which proxies /api to the service. */
const DASHBOARD_DEV_ORIGINS = ["http://127.0.0.1:5173", "http://localhost:5173"];

/**
 * Dashboard sign-in for devnet mode: unless the operator configured real
 * providers, two local OpenID providers on loopback, accepting the service's
 * own origin and the dashboard's dev server as redirect targets.
 */
export async function devnetSignIn(
  config: Config,
): Promise<{ config: Config; local: LocalIdentityProviders | undefined }> {
  if (config.auth.providers.length > 0) return { config, local: undefined };
  const origins = [`http://127.0.0.1:${config.port}`, `http://localhost:${config.port}`];
  const local = await startLocalIdentityProviders({
    redirectOrigins: [...origins, ...DASHBOARD_DEV_ORIGINS],
  });
  return { config: { ...config, auth: { ...config.auth, providers: local.providers } }, local };
}

export interface RunningDevnet {
  devnet: Devnet;
  /** The local Solana ledger, when DEVNET_NETWORKS names Solana. */
  solana: RunningSolana | undefined;
  /** The local XRP Ledger, when DEVNET_NETWORKS names xrpl:0. */
  xrpl: RunningXrpl | undefined;
  /** The local NEAR chain, when DEVNET_NETWORKS names near:mainnet. */
  near: RunningNear | undefined;
  /** The local Starknet, when DEVNET_NETWORKS names starknet:SN_MAIN. */
  starknet: RunningStarknet | undefined;
  chains: ChainSetup;
  /** The API key from the previous run, if the file had one. */
  previousApiKey: string | undefined;
  /**
   * The confidential vault on eip155:8453, ready for `createConfidentialVault`
   * (src/chains/evm/confidential) with `mode: { devnet: { cleartextFile } }`.
   */
  confidential:
    | {
        rpcUrl: string;
        chainId: number;
        contractAddress: `0x${string}`;
        operatorKey: Hex;
        receiptSignerKey: Hex;
        cleartextFile: string;
      }
    | undefined;
  /** Stops every local chain. */
  stop(): Promise<void>;
}

export async function bootDevnet(
  config: Config,
  progress: (line: string) => void,
): Promise<RunningDevnet> {
  let previousApiKey: string | undefined;
  try {
    previousApiKey = (await readDevnetFile(config.devnet.file)).apiKey;
  } catch {
    previousApiKey = undefined;
  }
  progress(
    `starting devnet: ${config.devnet.networks.join(", ")} (block time ${config.devnet.blockTimeSeconds === 0 ? "one block per transaction" : `${config.devnet.blockTimeSeconds}s`})…`,
  );
  const evmIds = config.devnet.networks.filter((id) => id.startsWith("eip155:"));
  const devnet = await startDevnet({
    networks: evmIds.length > 0 ? evmIds : ["eip155:8453"],
    blockTimeSeconds: config.devnet.blockTimeSeconds,
    outFile: config.devnet.file,
    progress,
    // Beside the database, which outlives restarts the same way.
    stateDir: join(config.dataDir, "devnet-chains"),
  });
  // Chains started so far, stopped together if a later one fails.
  const started: { stop(): Promise<unknown> }[] = [devnet];
  const startLedger = async <T extends { stop(): Promise<unknown>; info: object }>(
    id: string,
    what: string,
    start: () => Promise<T>,
  ): Promise<T | undefined> => {
    if (!config.devnet.networks.includes(id)) return undefined;
    progress(`starting ${what} for ${id}…`);
    try {
      const ledger = await start();
      started.push(ledger);
      await addDevnetNetwork(config.devnet.file, id, ledger.info);
      return ledger;
    } catch (e) {
      await Promise.all(started.map((s) => s.stop()));
      throw e;
    }
  };
  const solana = await startLedger(SOLANA_MAINNET, "the local Solana ledger (LiteSVM)", () =>
    startSolanaDevnet({}),
  );
  const xrpl = await startLedger(
    XRPL_MAINNET,
    "the local XRP Ledger (a ledger close every second)",
    () => startXrplLedger({}),
  );
  const near = await startLedger(NEAR_MAINNET, "the local NEAR chain (a block every second)", () =>
    startNearLedger({}),
  );
  const starknet = await startLedger(
    STARKNET_MAINNET,
    "the local Starknet (a block every second)",
    () => startStarknetLedger({}),
  );
  const infos = Object.entries(devnet.networks);
  const blockTimeMs = config.devnet.blockTimeSeconds * 1000;
  const keys = infos[0]?.[1].facilitatorPrivateKeys ?? [];
  const base = devnet.networks["eip155:8453"];
  const confidential =
    base?.confidential === undefined
      ? undefined
      : {
          rpcUrl: base.rpcUrl,
          chainId: base.chainId,
          contractAddress: base.confidential.contractAddress,
          operatorKey: base.confidential.operatorPrivateKey,
          receiptSignerKey: base.confidential.receiptSignerPrivateKey,
          // Beside the kept chain: encrypted inputs stay decryptable across restarts.
          cleartextFile: join(config.dataDir, "devnet-chains", "8453.fhevm-inputs.jsonl"),
        };
  return {
    devnet,
    solana,
    xrpl,
    near,
    starknet,
    previousApiKey,
    confidential,
    chains: {
      evm: {
        // Its anvil mines at the devnet's pace, not the mainnet's, and the
        // receipt watcher and fee quotes should keep to that pace.
        networks: infos.map(([id, info]) => ({
          id,
          rpcUrls: [info.rpcUrl],
          ...(blockTimeMs > 0 ? { blockTimeMs } : {}),
        })),
        privateKeys: keys as Hex[],
      },
      ...(solana
        ? {
            svm: {
              networks: [{ id: SOLANA_MAINNET, rpcUrl: solana.info.rpcUrl }],
              secretKeys: solana.info.facilitatorSecretKeys,
            },
          }
        : {}),
      ...(xrpl ? { xrpl: { networks: [{ id: XRPL_MAINNET, rpcUrl: xrpl.info.rpcUrl }] } } : {}),
      ...(near
        ? {
            near: {
              networks: [{ id: NEAR_MAINNET, rpcUrl: near.info.rpcUrl }],
              relayerKeys: near.info.relayers.map((r) => `${r.accountId}:${r.secretKey}`),
            },
          }
        : {}),
      ...(starknet
        ? {
            starknet: {
              networks: [{ id: STARKNET_MAINNET, rpcUrl: starknet.info.rpcUrl }],
              executors: starknet.executors,
            },
          }
        : {}),
    },
    async stop() {
      await Promise.all(started.map((s) => s.stop()));
    },
  };
}

/** Reuses the devnet API key while it still authenticates; otherwise makes a new one. */
export async function ensureDevnetApiKey(
  db: Db,
  auth: ApiKeyAuthenticator,
  previous: string | undefined,
): Promise<string> {
  if (previous && (await auth.authenticate(previous))) return previous;
  const account = (await findAccountByName(db, "devnet")) ?? (await createAccount(db, "devnet"));
  return (await createApiKey(db, account.id, "devnet")).key;
}

export async function publishDevnetAccess(
  file: string,
  facilitatorUrl: string,
  apiKey: string,
): Promise<void> {
  await updateDevnetFile(file, { facilitatorUrl, apiKey });
}

/**
 * The devnet's own token copies, with the decimals of the mainnet token of
 * the same symbol, so the dashboard shows devnet amounts in token units.
 */
export function devnetAssets(running: RunningDevnet): KnownAsset[] {
  return Object.entries(running.devnet.networks).flatMap(([network, info]) =>
    Object.entries(info.assets).flatMap(([symbol, address]) => {
      const decimals = findEvmNetwork(network)?.assets.find((a) => a.symbol === symbol)?.decimals;
      return decimals === undefined
        ? []
        : [{ network, address: String(address), symbol, decimals }];
    }),
  );
}
