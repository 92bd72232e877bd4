/**
 * Devnet mode: what `npm start` does with no configuration. The service
 * loads this module (and with it the compiler and the local chains) only in devnet
 * mode, by a dynamic import, so a production install needs neither. It
 * starts local chains in-process, gives the service what to serve and how
 * (its sign-in providers, and what the base family's descriptor adds: its
 * configuration, the confidential vault, the devnet's token copies for the
 * dashboard, its funded payers), and,
 * once the service listens, makes sure an account and an API key exist,
 * writes `facilitatorUrl` and `apiKey` into the devnet file so a script can
 * drive the whole flow from that file alone, and prints the banner.
 */
import { join } from "node:path";
import { addDevnetNetwork, readDevnetFile, updateDevnetFile } from "./devnetFile.js";
import { BASE_DEVNET, bootLedger, devnetFamilies, type RunningLedger } from "./families.js";
import { printDevnetBanner } from "./banner.js";
import { startLocalIdentityProviders } from "./identityProviders.js";
import type { Logger } from "pino";
import type { Config } from "../src/config/index.js";
import type { Service } from "../src/app.js";
import type { DevnetPayer } from "../src/features/billing/createBilling.js";
import type { ChainSetups } from "../src/chains/index.js";
import type { NetworkDescription } from "../src/chains/ports.js";
import type { ConfidentialVaultOptions } from "../src/chains/confidentialPort.js";
import { createAccount, findAccountByName } from "../src/features/accounts/accounts.js";
import { createApiKey } from "../src/features/keys/apiKeys.js";

/**
 * The account that owns the devnet's API key, and that the devnet's own
 * sign-in providers join: a person who runs the example and signs in sees
 * that payment and that key, not an empty account of their own.
 */
const DEVNET_ACCOUNT = "devnet";

/** The Vite dev server's origin (`npm run dashboard:dev`), which proxies /api to the service. */
const DASHBOARD_DEV_ORIGINS = ["http://127.0.0.1:5173", "http://localhost:5173"];

export interface DevnetMode {
  /** The configuration with what devnet mode adds: local sign-in, the base family's devnet keys. */
  config: Config;
  chains: ChainSetups;
  /** The devnet's own token copies, so the dashboard shows amounts in token units. */
  networks: NetworkDescription[];
  confidential: ConfidentialVaultOptions | undefined;
  /** Funded payers of the base family's first chain: the dashboard offers them to pay for plans. */
  payers: DevnetPayer[];
  /** Once the service listens: the API key, the devnet file and the banner. */
  announce(service: Service, url: string): Promise<void>;
  /** Stops every local chain and sign-in provider. */
  stop(): Promise<void>;
}

export async function bootDevnet(
  config: Config,
  progress: (line: string) => void,
  log: Logger,
): Promise<DevnetMode> {
  let previousApiKey: string | undefined;
  try {
    previousApiKey = (await readDevnetFile(config.devnet.file)).apiKey;
  } catch {
    previousApiKey = undefined;
  }
  progress(
    `starting devnet: ${config.devnet.networks.join(", ")} (block time ${config.devnet.blockTimeSeconds === 0 ? "one block per transaction" : `${config.devnet.blockTimeSeconds}s`})…`,
  );
  // Beside the database, which outlives restarts the same way.
  const keptDir = join(config.dataDir, "devnet-chains");
  const devnet = await BASE_DEVNET.start({
    networks: BASE_DEVNET.networks(config.devnet.networks),
    blockTimeSeconds: config.devnet.blockTimeSeconds,
    outFile: config.devnet.file,
    progress,
    stateDir: keptDir,
  });
  // What started so far, stopped together if a later part fails.
  const started: { stop(): Promise<unknown> }[] = [devnet];
  const stopAll = () => Promise.all(started.reverse().map((s) => s.stop())).then(() => undefined);
  try {
    const ledgers: RunningLedger[] = [];
    for (const [, family] of devnetFamilies()) {
      if (!config.devnet.networks.includes(family.network)) continue;
      progress(`starting ${family.what} for ${family.network}…`);
      const running = await bootLedger(family);
      started.push(running);
      await addDevnetNetwork(config.devnet.file, family.network, running.info);
      ledgers.push(running);
    }
    const signIn = await localSignIn(config, log);
    if (signIn.local) started.push(signIn.local);
    const chains: ChainSetups = {
      // Its chains mine at the devnet's pace, not the mainnet's, and the
      // receipt watcher and fee quotes should keep to that pace.
      ...(await BASE_DEVNET.setup(devnet, { blockTimeMs: config.devnet.blockTimeSeconds * 1000 })),
      ...Object.assign({}, ...ledgers.map((l) => l.setup)),
    };
    return {
      config: BASE_DEVNET.config(signIn.config),
      chains,
      networks: BASE_DEVNET.tokens(devnet),
      payers: BASE_DEVNET.payers(devnet),
      confidential: BASE_DEVNET.confidential(devnet, keptDir),
      async announce(service, url) {
        const apiKey = await devnetApiKey(service, previousApiKey);
        await updateDevnetFile(config.devnet.file, { facilitatorUrl: url, apiKey });
        printDevnetBanner({
          url,
          apiKey,
          chains: [
            ...BASE_DEVNET.banner(devnet),
            ...ledgers.map((l) => ({ network: l.network, line: l.banner, example: l.namespace })),
          ],
          account: DEVNET_ACCOUNT,
          file: config.devnet.file,
          dbKind: service.dbKind,
          dashboard: {
            url: `${url}/dashboard/`,
            providers: signIn.config.auth.providers.map((p) => p.label),
            local: signIn.local !== undefined,
          },
        });
      },
      stop: stopAll,
    };
  } catch (e) {
    await stopAll();
    throw e;
  }
}

/**
 * Dashboard sign-in for devnet mode: unless the operator configured real
 * providers, two local OpenID providers on loopback, accepting the service's
 * own origin and the dashboard's dev server as redirect targets.
 */
async function localSignIn(config: Config, log: Logger) {
  if (config.auth.providers.length > 0) return { config, local: undefined };
  const origins = [`http://127.0.0.1:${config.port}`, `http://localhost:${config.port}`];
  const local = await startLocalIdentityProviders({
    redirectOrigins: [...origins, ...DASHBOARD_DEV_ORIGINS],
    // Advice for deploying oidc-provider, which these local providers are not.
    notice: (line) => log.debug({ component: "devnet-sign-in" }, line),
  });
  // Operator-configured providers (the branch above) keep production's
  // rule, each identity its own account; only these local ones join.
  const providers = local.providers.map((p) => ({ ...p, joinsAccount: DEVNET_ACCOUNT }));
  return { config: { ...config, auth: { ...config.auth, providers } }, local };
}

/**
 * Reuses the devnet API key while it still authenticates as the devnet
 * account (the one devnet sign-ins join); otherwise makes a new one there.
 */
async function devnetApiKey(service: Service, previous: string | undefined): Promise<string> {
  const { db } = service;
  const account =
    (await findAccountByName(db, DEVNET_ACCOUNT)) ?? (await createAccount(db, DEVNET_ACCOUNT));
  const principal = previous ? await service.auth.authenticate(previous) : null;
  if (previous && principal?.accountId === account.id) return previous;
  return (await createApiKey(db, account.id, DEVNET_ACCOUNT)).key;
}
