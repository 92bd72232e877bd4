/**
 * Process entry: config → (devnet) → service → listen, and a graceful
 * shutdown that lets in-flight settlements finish before the database closes.
 */
import { ConfigError, loadConfig, type Config } from "./config/index.js";
import { confidentialVaultOptions } from "./config/confidential.js";
import { createService, type Service } from "./app.js";
import { createLogger } from "./lib/logger.js";
import type { DevnetMode } from "../devnet/serviceMode.js";
import { limitHeapGrowth } from "./lib/heapGrowth.js";
import { StartRefused, checkPortFree, claimDataDir, refusalFor } from "./startChecks.js";

/** How @x402/evm's background asset-contract check words an RPC failure. */
const ABANDONED_ASSET_CHECK = "failed to check whether asset is a contract";

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
      progress("see docs/configuration.md");
      process.exit(2);
    }
    throw e;
  }
  const log = createLogger(config.logLevel);

  // Before anything starts: another facilitator on this data directory or
  // this port is one line and exit 1, with nothing of ours left running.
  let releaseDataDir = () => undefined as void;
  try {
    releaseDataDir = claimDataDir(config);
    await checkPortFree(config);
  } catch (e) {
    releaseDataDir();
    if (!(e instanceof StartRefused)) throw e;
    progress(e.message);
    process.exit(1);
  }

  // The devnet (compiler, anvil) is loaded only in devnet mode: a production
  // install (`npm ci --omit=dev`) does not have it.
  const devnet: DevnetMode | undefined =
    config.mode === "devnet"
      ? await (await import("../devnet/serviceMode.js")).bootDevnet(config, progress, log)
      : undefined;
  if (devnet) config = devnet.config;

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
      releaseDataDir();
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
  // @x402/evm starts its asset-contract check (an eth_getCode) in the
  // background beside signature verification; when verification returns
  // early, nobody awaits the check, and an RPC failure during it would be an
  // unhandled rejection, which ends the process. That one is noise: logged.
  // Any other unhandled rejection is a bug of ours and still ends it.
  process.on("unhandledRejection", (reason) => {
    if (reason instanceof Error && reason.message.startsWith(ABANDONED_ASSET_CHECK)) {
      log.warn({ err: reason.message }, "an abandoned asset-contract check failed");
      return;
    }
    throw reason;
  });

  try {
    const confidential = devnet ? devnet.confidential : confidentialVaultOptions(config);
    service = await createService({
      config,
      chains: devnet?.chains ?? config.chains,
      log,
      ...(devnet ? { networks: devnet.networks, devnetPayers: devnet.payers } : {}),
      ...(confidential ? { confidential } : {}),
    });
    const address = await service.listen();
    const url = address.replace("0.0.0.0", "127.0.0.1").replace("[::]", "127.0.0.1");
    if (devnet) {
      await devnet.announce(service, url);
    } else {
      log.info(
        {
          url,
          networks: service.facilitator.networks(),
          signers: service.facilitator.supported().signers,
          database: service.dbKind,
        },
        "x402 facilitator listening",
      );
    }
  } catch (e) {
    // A port taken since the check above reads as the check's own line.
    const refused = refusalFor(e, config);
    if (refused) {
      progress(refused.message);
    } else {
      log.fatal({ err: (e as Error).message }, "could not start");
      progress(`could not start: ${(e as Error).message}`);
    }
    await service?.close().catch(() => undefined);
    await devnet?.stop().catch(() => undefined);
    releaseDataDir();
    process.exit(1);
  }
}

void main();
