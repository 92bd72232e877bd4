/**
 * The EVM family's factory: everything the service decides about running
 * the EVM mechanisms (native signature recovery, JSON-RPC batching per URL,
 * the gas floor in wei, the batch authorizer's key) happens here, so the
 * composition root only names the family.
 */
import type { PendingSettlementStore } from "@x402/core/facilitator";
import type { Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { FamilyContext } from "../ports.js";
import { EvmChainAdapter, type EvmNetworkSetup } from "./index.js";
import { batchingUrls } from "./rpcBatchProbe.js";
import { routeViemRecoveryToNative } from "./viemNativeRecovery.js";
import { routeViemKeccakToNative } from "./viemNativeKeccak.js";

/** The EVM part of the chain configuration. */
export interface EvmSetup {
  networks: readonly EvmNetworkSetup[];
  privateKeys: readonly Hex[];
}

export interface EvmSettings {
  /** Recover EOA signatures with libsecp256k1 inside viem. */
  nativeRecovery: boolean;
  /** Hash keccak-256 natively inside viem. */
  nativeKeccak: boolean;
  /** JSON-RPC batch size for URLs that accept batches; 0 = off. */
  rpcBatchSize: number;
  minSignerBalanceWei: bigint;
  erc6492AllowedFactories: readonly `0x${string}`[];
  batchAuthorizerKey: Hex | undefined;
  stuckTxMs: number | undefined;
  pendingSettlementStore: PendingSettlementStore;
  /** Told whether native recovery is on (a metric, so an upstream change that turns it off shows). */
  onNativeRecovery?: (active: boolean) => void;
}

export async function createEvm(
  setup: EvmSetup,
  settings: EvmSettings,
  ctx: FamilyContext,
): Promise<EvmChainAdapter> {
  const log = ctx.log.child({ component: "evm" });
  if (settings.nativeRecovery) {
    const recovery = await routeViemRecoveryToNative();
    settings.onNativeRecovery?.(recovery.active);
    if (!recovery.active) {
      log.warn(
        { why: recovery.why },
        "native signature recovery is off; verification uses pure JS",
      );
    }
  } else {
    settings.onNativeRecovery?.(false);
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
    pendingSettlementStore: settings.pendingSettlementStore,
    minSignerBalanceWei: settings.minSignerBalanceWei,
    eip6492AllowedFactories: settings.erc6492AllowedFactories,
    ...(rpcBatching ? { rpcBatching } : {}),
    ...(settings.batchAuthorizerKey
      ? { batchAuthorizer: privateKeyToAccount(settings.batchAuthorizerKey) }
      : {}),
    leases: ctx.leases,
    onSignerHealth: (network, address, healthy, balanceWei) =>
      ctx.onSignerHealth(network, address, healthy, Number(balanceWei) / 1e18),
    ...(ctx.onTransactionPhase ? { onTransactionPhase: ctx.onTransactionPhase } : {}),
    ...(settings.stuckTxMs !== undefined ? { stuckAfterMs: settings.stuckTxMs } : {}),
    ...(ctx.pollingIntervalMs !== undefined ? { pollingIntervalMs: ctx.pollingIntervalMs } : {}),
  });
}
