/**
 * Process entry: config → (devnet) → service → listen, and a graceful
 * shutdown that lets in-flight settlements finish before the database closes.
 */
import { ConfigError, loadConfig, type Config } from "./config/index.js";
import { createService, type ChainSetup, type Service } from "./app.js";
import type { ConfidentialVaultOptions } from "./chains/evm/confidential/vault.js";
import { createLogger } from "./lib/logger.js";
import type { RunningDevnet } from "../devnet/serviceMode.js";
import { printDevnetBanner, printProductionBanner } from "./banner.js";
import { limitHeapGrowth } from "./lib/heapGrowth.js";

function progress(line: string): void {
  process.stderr.write(`${line}\n`);
}

async function main(): Promise<void> {
  limitHeapGrowth();
  let config: Config;
  try {
    config = loadConfig();
  } catch (e) {
    if (e instanceof ConfigError) {
      progress(`configuration error: ${e.message}`);
      progress("see the Configuration section of README.md");
      process.exit(2);
    }
    throw e;
  }
  const log = createLogger(config.logLevel);

  // The devnet (compiler, anvil) is loaded only in devnet mode: a production
  // install (`npm ci --omit=dev`) does not have it.
  const devnetMode =
    config.mode === "devnet" ? await import("../devnet/serviceMode.js") : undefined;
  let devnet: RunningDevnet | undefined;
  let chains: ChainSetup;
  let stopSignIn: (() => Promise<void>) | undefined;
  if (devnetMode) {
    devnet = await devnetMode.bootDevnet(config, progress);
    chains = devnet.chains;
    const signIn = await devnetMode.devnetSignIn(config);
    config = signIn.config;
    stopSignIn = signIn.local?.stop;
  } else {
    chains = config.chains;
  }

  let service: Service | undefined;
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    const started = Date.now();
    progress(
      `${signal}: shutting down: finishing in-flight requests (up to ${config.shutdownDrainMs} ms)…`,
    );
    // Past the drain time and ten more seconds for the database and leases,
    // something is stuck: exit non-zero so the supervisor notices.
    const force = setTimeout(() => {
      progress("shutdown took too long; exiting");
      process.exit(1);
    }, config.shutdownDrainMs + 10_000);
    force.unref();
    let code = 0;
    try {
      await service?.close({ drainMs: config.shutdownDrainMs });
      await devnet?.stop();
      await stopSignIn?.();
      progress(`stopped cleanly in ${Date.now() - started} ms`);
    } catch (e) {
      code = 1;
      progress(`shutdown failed: ${(e as Error).message}`);
    } finally {
      process.exit(code);
    }
  };
  process.on("SIGINT", () => void shutdown("SIGINT"));
  process.on("SIGTERM", () => void shutdown("SIGTERM"));

  try {
    service = await createService({
      // Devnet mode co-signs batch-settlement claims with a devnet key unless told otherwise.
      config:
        devnetMode && !config.evm.batchAuthorizerKey
          ? {
              ...config,
              evm: { ...config.evm, batchAuthorizerKey: devnetMode.devnetBatchAuthorizerKey() },
            }
          : config,
      chains,
      log,
      ...(devnet ? { knownAssets: devnetMode?.devnetAssets(devnet) } : {}),
      ...confidentialSetup(devnet, config),
    });
    const address = await service.listen();
    const url = address.replace("0.0.0.0", "127.0.0.1").replace("[::]", "127.0.0.1");
    if (devnet && devnetMode) {
      const apiKey = await devnetMode.ensureDevnetApiKey(
        service.db,
        service.auth,
        devnet.previousApiKey,
      );
      await devnetMode.publishDevnetAccess(config.devnet.file, url, apiKey);
      printDevnetBanner({
        url,
        apiKey,
        devnet: devnet.devnet,
        ...(devnet.solana ? { solana: devnet.solana.info } : {}),
        ...(devnet.xrpl ? { xrpl: devnet.xrpl.info } : {}),
        ...(devnet.near ? { near: devnet.near.info } : {}),
        ...(devnet.starknet ? { starknet: devnet.starknet.info } : {}),
        file: config.devnet.file,
        dbKind: service.dbKind,
        dashboard: {
          url: `${url}/dashboard/`,
          providers: config.auth.providers.map((p) => p.label),
        },
      });
    } else {
      const networks = [...service.facilitator.networks()];
      printProductionBanner({ url, service, networks });
    }
  } catch (e) {
    log.fatal({ err: (e as Error).message }, "could not start");
    progress(`could not start: ${(e as Error).message}`);
    await service?.close().catch(() => undefined);
    await devnet?.stop().catch(() => undefined);
    process.exit(1);
  }
}

/**
 * The confidential settlement vault: the devnet's own in devnet mode (mock
 * coprocessor and KMS in-process), the configured one with Zama's relayer in
 * production, or none.
 */
function confidentialSetup(
  devnet: RunningDevnet | undefined,
  config: Config,
): { confidential?: ConfidentialVaultOptions } {
  if (devnet) {
    const c = devnet.confidential;
    if (!c) return {};
    const { cleartextFile, ...rest } = c;
    return { confidential: { ...rest, mode: { devnet: { cleartextFile } } } };
  }
  const c = config.confidentialVault;
  const base = config.chains.evm?.networks.find((n) => n.id === "eip155:8453");
  if (!c || !base?.rpcUrls[0]) return {};
  return {
    confidential: {
      rpcUrl: base.rpcUrls[0],
      chainId: 8453,
      contractAddress: c.contractAddress,
      operatorKey: c.operatorKey,
      receiptSignerKey: c.receiptSignerKey,
      mode: c.fhevm,
    },
  };
}

void main();
