/**
 * The EVM family's factory: everything the service decides about running
 * the EVM mechanisms (native signature recovery, JSON-RPC batching per URL,
 * the gas floor in wei, the batch authorizer's key) happens here, so the
 * composition root only names the family.
 */
import { privateKeyToAccount } from "viem/accounts";
import type { FamilyContext } from "../ports.js";
import type { EvmSettings, EvmSetup } from "./config.js";
import { EvmChainAdapter } from "./index.js";
import { batchingUrls } from "./rpc/rpcBatchProbe.js";
import { routeViemRecoveryToNative } from "./native/viemNativeRecovery.js";
import { routeViemKeccakToNative } from "./native/viemNativeKeccak.js";

export type { EvmSettings, EvmSetup };

export async function createEvm(
  setup: EvmSetup,
  settings: EvmSettings,
  ctx: FamilyContext,
): Promise<EvmChainAdapter> {
  const log = ctx.log.child({ component: "evm" });
  if (settings.nativeRecovery) {
    const recovery = await routeViemRecoveryToNative();
    // A metric, so an upstream change that turns it off shows.
    ctx.onNativeRecovery?.(recovery.active);
    if (!recovery.active) {
      log.warn(
        { why: recovery.why },
        "native signature recovery is off; verification uses pure JS",
      );
    }
  } else {
    ctx.onNativeRecovery?.(false);
  }
  if (settings.nativeKeccak) {
    const hashing = await routeViemKeccakToNative();
    if (!hashing.active) {
      log.warn({ why: hashing.why }, "native keccak hashing is off; viem hashes in pure JS");
    }
  }
  const rpcUrls = setup.networks.flatMap((n) => n.rpcUrls);
  const rpcBatching =
    settings.rpcBatchSize > 0
      ? { batchSize: settings.rpcBatchSize, urls: await batchingUrls(rpcUrls, log) }
      : undefined;
  return new EvmChainAdapter({
    networks: setup.networks,
    privateKeys: setup.privateKeys,
    confirmationTimeoutMs: ctx.settleTimeoutMs,
    log,
    journal: ctx.journal,
    ...(ctx.sponsoredFundings ? { sponsoredFundings: ctx.sponsoredFundings } : {}),
    ...(ctx.pendingSettlements ? { pendingSettlementStore: ctx.pendingSettlements } : {}),
    minSignerBalanceWei: settings.minSignerBalanceWei,
    maxGasPerTransaction: settings.maxGasPerTransaction,
    failedGasBudgetWei: settings.failedGasBudgetWei,
    ...(ctx.onFailedGasBudget ? { onFailedGasBudget: ctx.onFailedGasBudget } : {}),
    eip6492AllowedFactories: settings.erc6492AllowedFactories,
    knownWalletImplementations: settings.knownWalletImplementations,
    ...(rpcBatching ? { rpcBatching } : {}),
    ...(settings.batchAuthorizerKey
      ? { batchAuthorizer: privateKeyToAccount(settings.batchAuthorizerKey) }
      : {}),
    leases: ctx.leases,
    ...(ctx.confidentialVault ? { confidentialVault: ctx.confidentialVault } : {}),
    onSignerHealth: (network, address, healthy, balanceWei) =>
      ctx.onSignerHealth(
        network,
        address,
        healthy,
        Number(balanceWei) / 1e18,
        Number(settings.minSignerBalanceWei) / 1e18,
      ),
    ...(ctx.onTransactionPhase ? { onTransactionPhase: ctx.onTransactionPhase } : {}),
    ...(ctx.onFeePaid ? { onFeePaid: ctx.onFeePaid } : {}),
    ...(settings.stuckTxMs !== undefined ? { stuckAfterMs: settings.stuckTxMs } : {}),
    ...(ctx.pollingIntervalMs !== undefined ? { pollingIntervalMs: ctx.pollingIntervalMs } : {}),
  });
}
