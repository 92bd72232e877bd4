/**
 * A whole service for tests: the devnet's base chains with their contracts
 * (`BASE_DEVNET` of devnet/families.ts), the local ledgers of the families a
 * test asks for, a real database, and the service listening on a loopback
 * port with an account and an API key ready.
 */
import type { Hex } from "viem";
import {
  BASE_DEVNET,
  DEVNET_FAMILIES,
  type RunningBase,
  type AnyDevnetFamily,
  type DevnetNamespace,
  type RunningOf,
  type StartOptionsOf,
} from "../../devnet/families.js";
import type { ChainSetups } from "../../src/chains/index.js";
import { createService, type Service, type ServiceOptions } from "../../src/app.js";
import { loadConfig } from "../../src/config/index.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { openTestDb, type Backend } from "./database.js";
import type { DbTraffic } from "../../src/storage/countingDialect.js";

export interface TestStack {
  url: string;
  apiKey: string;
  accountId: string;
  devnet: RunningBase;
  service: Service;
  network: string;
  rpcUrl: string;
  /** The first network's USDC (undefined, despite the type, on a network without USDC). */
  usdc: Hex;
  /** symbol → address of every token on the first network, e.g. `assets["USDG"]` where that token runs. */
  assets: Record<string, Hex>;
  payerKeys: Hex[];
  /** Each family's running ledger the stack was asked for (`families`), by namespace: `stack.families[namespace]`. */
  families: RunningFamilies;
  stop(): Promise<void>;
}

/** The running ledger of each family asked for, by namespace. */
type RunningFamilies = { [N in DevnetNamespace]?: RunningOf<N> };

/**
 * A family's ledger next to the service: its start options (the
 * descriptor's quick pace unless given), and `rpcUrl`, which puts
 * something (a failing proxy) between the service and the ledger: it gets
 * the ledger's URL and returns the one to use.
 */
type FamilyStackOptions<N extends DevnetNamespace> = Partial<StartOptionsOf<N>> & {
  rpcUrl?: (ledgerUrl: string) => Promise<string>;
};

export interface StackOptions {
  backend?: Backend;
  blockTimeSeconds?: number;
  networks?: string[];
  env?: Record<string, string>;
  maxGasPriceWei?: bigint;
  /** Puts something (a failing proxy) between the service and each base chain: gets its URL, returns the one to use. */
  baseRpcUrl?: (nodeUrl: string) => Promise<string>;
  /** How long verify threads stay idle before they stop (ServiceOptions). */
  verifyThreadsIdleStopMs?: number;
  /** Runs after the chains are up and before the service starts. */
  beforeService?: (devnet: RunningBase) => Promise<void>;
  facilitators?: number;
  payers?: number;
  /**
   * Also run these families' local ledgers (devnet/families.ts) and serve
   * them: `families: { [namespace]: { ...start options, rpcUrl } }`, `{}` for the
   * family's quick pace.
   */
  families?: { [N in DevnetNamespace]?: FamilyStackOptions<N> };
  /** Serve confidential settlement with the devnet's vault (mock coprocessor in-process). */
  confidential?: boolean;
  /**
   * Where the vault's mock coprocessor keeps encrypted inputs' cleartexts
   * (`<chainId>.fhevm-inputs.jsonl`, as a kept devnet does), so a mock in
   * another process (a merchant's check) decrypts what the service encrypted.
   */
  confidentialInputsDir?: string;
  /** The vault's challenge window in seconds (default 0: a closed day is released at once). */
  confidentialChallengeWindowSeconds?: number;
  /** Node's process metrics on /metrics (off by default: they are the test runner's own). */
  collectProcessMetrics?: boolean;
  /** Told of every database statement and round trip the service makes. */
  dbTraffic?: DbTraffic;
  /** The confidential worker: false (tests drive its passes) or its clock. */
  confidentialWorker?: NonNullable<ServiceOptions["overrides"]>["confidentialWorker"];
  /** The reorg watch's window and pace (a test's own, shorter than the service's). */
  successWatch?: NonNullable<ServiceOptions["overrides"]>["successWatch"];
}

export async function startStack(opts: StackOptions = {}): Promise<TestStack> {
  const networks = opts.networks ?? BASE_DEVNET.networks([]);
  const start = () =>
    BASE_DEVNET.start({
      networks,
      blockTimeSeconds: opts.blockTimeSeconds ?? 0,
      outFile: null,
      ...(opts.facilitators ? { facilitators: opts.facilitators } : {}),
      ...(opts.payers ? { payers: opts.payers } : {}),
      ...(opts.confidentialChallengeWindowSeconds === undefined
        ? {}
        : { confidentialChallengeWindowSeconds: opts.confidentialChallengeWindowSeconds }),
    });
  // A setup transaction of a fresh chain was once never mined (its receipt
  // wait timed out, the chain otherwise idle). Setting up is not what any
  // test here is about, so a failed start is tried once more on fresh
  // nodes (the failed start stopped its own), with the first error shown.
  const devnet = await start().catch((e: unknown) => {
    console.error(`the devnet did not start, trying once more: ${String(e)}`);
    return start();
  });
  await opts.beforeService?.(devnet);
  const families = await startFamilies(opts.families ?? {});
  const database = await openTestDb(opts.backend ?? "pglite", opts.dbTraffic);
  const config = loadConfig({
    FACILITATOR_MODE: "devnet",
    PORT: "0",
    HOST: "127.0.0.1",
    LOG_LEVEL: "silent",
    SETTLE_TIMEOUT_MS: "20000",
    ...opts.env,
  });
  const first = Object.entries(devnet.networks)[0]!;
  const confidential = opts.confidential
    ? BASE_DEVNET.confidential(devnet, opts.confidentialInputsDir)
    : undefined;
  if (opts.confidential && !confidential)
    throw new Error(`confidential: true needs ${BASE_DEVNET.vaultNetwork} in networks`);
  const service = await createService({
    config,
    database,
    devnetPayers: BASE_DEVNET.payers(devnet),
    ...(confidential ? { confidential } : {}),
    overrides: {
      collectProcessMetrics: opts.collectProcessMetrics ?? false,
      pollingIntervalMs: 50,
      ...(opts.confidentialWorker !== undefined
        ? { confidentialWorker: opts.confidentialWorker }
        : {}),
      ...(opts.successWatch ? { successWatch: opts.successWatch } : {}),
      ...(opts.verifyThreadsIdleStopMs !== undefined
        ? { verifyThreadsIdleStopMs: opts.verifyThreadsIdleStopMs }
        : {}),
    },
    chains: {
      ...(await BASE_DEVNET.setup(devnet, {
        ...(opts.baseRpcUrl ? { rpcUrl: opts.baseRpcUrl } : {}),
        ...(opts.maxGasPriceWei !== undefined ? { maxGasPriceWei: opts.maxGasPriceWei } : {}),
      })),
      ...families.setups,
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
    families: families.running,
    async stop() {
      await service.close();
      await database.close();
      await devnet.stop();
      await families.stop();
    },
  };
}

/**
 * Starts the ledger of each family asked for, through its devnet descriptor,
 * and gives what the service is given for them; one that fails to start
 * stops the ones before it.
 */
async function startFamilies(asked: NonNullable<StackOptions["families"]>) {
  const running: Record<string, { stop(): Promise<unknown> }> = {};
  const setups: ChainSetups[] = [];
  const stop = async () => {
    for (const ledger of Object.values(running).reverse()) await ledger.stop();
  };
  try {
    for (const [namespace, options] of Object.entries(asked)) {
      const family = DEVNET_FAMILIES[namespace as DevnetNamespace] as AnyDevnetFamily;
      const { rpcUrl, ...start } = options as FamilyStackOptions<DevnetNamespace>;
      const ledger = await family.start({ ...family.quick, ...start });
      running[namespace] = ledger;
      setups.push(family.setup(ledger, await rpcUrl?.(ledger.info.rpcUrl)));
    }
  } catch (e) {
    await stop();
    throw e;
  }
  return {
    running: running as RunningFamilies,
    setups: Object.assign({}, ...setups) as ChainSetups,
    stop,
  };
}
