/**
 * The service in process on one devnet EVM network (`eip155:8453`), reached
 * through `rpcUrl` (the devnet's own, or a failing proxy in front of it), on
 * an in-memory database, with one account and API key: the fixture of the
 * tests that play a provider's failures against a settle.
 */
import type { Hex } from "viem";
import type { Devnet } from "../../devnet/evm/index.js";
import { createService, type Service } from "../../src/app.js";
import { loadConfig } from "../../src/config/index.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { openTestDb } from "./database.js";

export interface EvmService {
  service: Service;
  url: string;
  apiKey: string;
  /** Closes the service and its database (not the devnet). */
  close(): Promise<void>;
}

export async function startEvmService(opts: {
  devnet: Devnet;
  rpcUrl: string;
  /** Configuration beyond the devnet defaults (`RECONCILE_AFTER_MS`, …). */
  env?: Record<string, string>;
  /** `reconcile: false`: the test runs the reconciler itself, when it means to. */
  reconcile?: boolean;
  accountName: string;
}): Promise<EvmService> {
  const info = opts.devnet.networks["eip155:8453"]!;
  const db = await openTestDb("pglite");
  const service = await createService({
    overrides: {
      collectProcessMetrics: false,
      pollingIntervalMs: 50,
      ...(opts.reconcile === false ? { reconcile: false } : {}),
    },
    config: loadConfig({
      FACILITATOR_MODE: "devnet",
      PORT: "0",
      HOST: "127.0.0.1",
      LOG_LEVEL: "silent",
      ...opts.env,
    }),
    database: db,
    chains: {
      eip155: {
        networks: [{ id: "eip155:8453", rpcUrls: [opts.rpcUrl] }],
        privateKeys: info.facilitatorPrivateKeys as Hex[],
      },
    },
  });
  const url = await service.listen();
  const account = await createAccount(service.db, opts.accountName);
  const apiKey = (await createApiKey(service.db, account.id, opts.accountName)).key;
  return {
    service,
    url,
    apiKey,
    async close() {
      await service.close();
      await db.close();
    },
  };
}
