/**
 * A whole service for tests: real anvil chains with the devnet contracts, a
 * real database, and the service listening on a loopback port with an
 * account and an API key ready.
 */
import type { Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { startDevnet, type Devnet } from "../../devnet/evm/index.js";
import { startSolanaLedger, type RunningSolana } from "../../devnet/svm/index.js";
import { solanaService } from "../../devnet/svm/service.js";
import type { SolanaLedger } from "../../devnet/svm/ledger.js";
import { startXrplLedger, type RunningXrpl } from "../../devnet/xrpl/index.js";
import { xrplService } from "../../devnet/xrpl/service.js";
import { startNearLedger, type RunningNear } from "../../devnet/near/index.js";
import { nearService } from "../../devnet/near/service.js";
import { startStarknetLedger, type RunningStarknet } from "../../devnet/starknet/index.js";
import { starknetService } from "../../devnet/starknet/service.js";
import { createService, type Service, type ServiceOptions } from "../../src/app.js";
import { startDevnetFhevm } from "../../devnet/evm/fhevm.js";
import { loadConfig } from "../../src/config/index.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { openTestDb, type Backend } from "./database.js";

export interface TestStack {
  url: string;
  apiKey: string;
  accountId: string;
  devnet: Devnet;
  service: Service;
  network: string;
  rpcUrl: string;
  /** The first network's USDC (undefined, despite the type, on a network without USDC). */
  usdc: Hex;
  /** symbol → address of every token on the first network, e.g. `assets["USDG"]` on eip155:4663. */
  assets: Record<string, Hex>;
  payerKeys: Hex[];
  /** The local Solana ledger, when started with `solana: true`. */
  solana?: RunningSolana & { ledger: SolanaLedger };
  /** The local XRP Ledger, when started with `xrpl: true`. */
  xrpl?: RunningXrpl;
  /** The local NEAR chain, when started with `near: true`. */
  near?: RunningNear;
  /** The local Starknet, when started with `starknet: true`. */
  starknet?: RunningStarknet;
  stop(): Promise<void>;
}

export interface StackOptions {
  backend?: Backend;
  blockTimeSeconds?: number;
  networks?: string[];
  env?: Record<string, string>;
  maxGasPriceWei?: bigint;
  /** Puts something (a failing proxy) between the service and each EVM chain: gets its URL, returns the one to use. */
  evmRpcUrl?: (nodeUrl: string) => Promise<string>;
  /** How long verify threads stay without an EVM verification (ServiceOptions). */
  verifyThreadsIdleStopMs?: number;
  /** Runs after the chains are up and before the service starts. */
  beforeService?: (devnet: Devnet) => Promise<void>;
  facilitators?: number;
  payers?: number;
  /** Also run a local Solana ledger and serve Solana. */
  solana?: boolean;
  /** Puts something (a failing proxy) between the service and the Solana ledger: gets its URL, returns the one to use. */
  solanaRpcUrl?: (ledgerUrl: string) => Promise<string>;
  /** Also run a local XRP Ledger and serve xrpl:0 (closing a ledger every `xrplCloseMs`, default 1000). */
  xrpl?: boolean;
  xrplCloseMs?: number;
  /** Puts something (a failing proxy) between the service and the XRP Ledger: gets its URL, returns the one to use. */
  xrplRpcUrl?: (ledgerUrl: string) => Promise<string>;
  /** Also run a local NEAR chain and serve near:mainnet (a block every `nearBlockMs`, default 500). */
  near?: boolean;
  nearBlockMs?: number;
  /** Puts something (a failing proxy) between the service and the NEAR chain. */
  nearRpcUrl?: (chainUrl: string) => Promise<string>;
  /** Also run a local Starknet and serve starknet:SN_MAIN (a block every `starknetBlockMs`, default 200). */
  starknet?: boolean;
  starknetBlockMs?: number;
  /** Puts something (a failing proxy) between the service and Starknet: gets its URL, returns the one to use. */
  starknetRpcUrl?: (nodeUrl: string) => Promise<string>;
  /** Serve confidential settlement with the devnet's vault on eip155:8453 (mock coprocessor in-process). */
  confidential?: boolean;
  /** The vault's challenge window in seconds (default 0: a closed day is released at once). */
  confidentialChallengeWindowSeconds?: number;
  /** Node's process metrics on /metrics (off by default: they are the test runner's own). */
  collectProcessMetrics?: boolean;
  /** The confidential worker: false (tests drive its passes) or its clock. */
  confidentialWorker?: NonNullable<ServiceOptions["overrides"]>["confidentialWorker"];
}

export async function startStack(opts: StackOptions = {}): Promise<TestStack> {
  const networks = opts.networks ?? ["eip155:8453"];
  const start = () =>
    startDevnet({
      networks,
      blockTimeSeconds: opts.blockTimeSeconds ?? 0,
      outFile: null,
      ...(opts.facilitators ? { facilitators: opts.facilitators } : {}),
      ...(opts.payers ? { payers: opts.payers } : {}),
      ...(opts.confidentialChallengeWindowSeconds === undefined
        ? {}
        : { confidentialChallengeWindowSeconds: opts.confidentialChallengeWindowSeconds }),
    });
  // A setup transaction of a fresh anvil was once never mined (its receipt
  // wait timed out, the chain otherwise idle). Setting up is not what any
  // test here is about, so a failed start is tried once more on fresh
  // nodes (the failed start stopped its own), with the first error shown.
  const devnet = await start().catch((e: unknown) => {
    console.error(`the devnet did not start, trying once more: ${String(e)}`);
    return start();
  });
  await opts.beforeService?.(devnet);
  const solana = opts.solana ? await startSolanaLedger({ slotMs: 100 }) : undefined;
  const xrpl = opts.xrpl ? await startXrplLedger({ closeMs: opts.xrplCloseMs ?? 1000 }) : undefined;
  const near = opts.near ? await startNearLedger({ blockMs: opts.nearBlockMs ?? 500 }) : undefined;
  const starknet = opts.starknet
    ? await startStarknetLedger({ blockMs: opts.starknetBlockMs ?? 200 })
    : undefined;
  const database = await openTestDb(opts.backend ?? "pglite");
  const config = loadConfig({
    FACILITATOR_MODE: "devnet",
    PORT: "0",
    HOST: "127.0.0.1",
    LOG_LEVEL: "silent",
    SETTLE_TIMEOUT_MS: "20000",
    ...opts.env,
  });
  const infos = Object.entries(devnet.networks);
  const first = infos[0]!;
  const vault = devnet.networks["eip155:8453"]?.confidential;
  if (opts.confidential && !vault)
    throw new Error("confidential: true needs eip155:8453 in networks");
  const service = await createService({
    config,
    database,
    devnetPayers: first[1].payerPrivateKeys.map((k) => ({
      address: privateKeyToAccount(k).address,
      privateKey: k,
    })),
    ...(opts.confidential && vault
      ? {
          confidential: {
            rpcUrl: devnet.networks["eip155:8453"]!.rpcUrl,
            chainId: 8453,
            contractAddress: vault.contractAddress,
            operatorKey: vault.operatorPrivateKey,
            receiptSignerKey: vault.receiptSignerPrivateKey,
            mode: {
              mock: () =>
                startDevnetFhevm({ rpcUrl: devnet.networks["eip155:8453"]!.rpcUrl, chainId: 8453 }),
            },
          },
        }
      : {}),
    overrides: {
      collectProcessMetrics: opts.collectProcessMetrics ?? false,
      pollingIntervalMs: 50,
      ...(opts.confidentialWorker !== undefined
        ? { confidentialWorker: opts.confidentialWorker }
        : {}),
      ...(opts.verifyThreadsIdleStopMs !== undefined
        ? { verifyThreadsIdleStopMs: opts.verifyThreadsIdleStopMs }
        : {}),
    },
    chains: {
      eip155: {
        networks: await Promise.all(
          infos.map(async ([id, info]) => ({
            id,
            rpcUrls: [opts.evmRpcUrl ? await opts.evmRpcUrl(info.rpcUrl) : info.rpcUrl],
            maxGasPriceWei: opts.maxGasPriceWei,
          })),
        ),
        privateKeys: first[1].facilitatorPrivateKeys as Hex[],
      },
      ...(solana ? solanaService.setup(solana, await opts.solanaRpcUrl?.(solana.info.rpcUrl)) : {}),
      ...(xrpl ? xrplService.setup(xrpl, await opts.xrplRpcUrl?.(xrpl.info.rpcUrl)) : {}),
      ...(near ? nearService.setup(near, await opts.nearRpcUrl?.(near.info.rpcUrl)) : {}),
      ...(starknet
        ? starknetService.setup(starknet, await opts.starknetRpcUrl?.(starknet.info.rpcUrl))
        : {}),
    },
  });
  const url = await service.listen();
  const account = await createAccount(service.db, "test");
  const key = await createApiKey(service.db, account.id, "test");
  return {
    url,
    apiKey: key.key,
    accountId: account.id,
    devnet,
    service,
    network: first[0],
    rpcUrl: first[1].rpcUrl,
    usdc: first[1].assets["USDC"] as Hex,
    assets: { ...first[1].assets } as Record<string, Hex>,
    payerKeys: first[1].payerPrivateKeys as Hex[],
    ...(solana ? { solana } : {}),
    ...(xrpl ? { xrpl } : {}),
    ...(near ? { near } : {}),
    ...(starknet ? { starknet } : {}),
    async stop() {
      await service.close();
      await database.close();
      await devnet.stop();
      await solana?.stop();
      await xrpl?.stop();
      await near?.stop();
      await starknet?.stop();
    },
  };
}
