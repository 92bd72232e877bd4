/**
 * The EVM family: registers the official `@x402/evm` mechanisms (`exact`,
 * `upto`, `batch-settlement`) for each configured network, with this
 * service's signer, and adds the per-chain checks they leave to the operator.
 */
import type { PendingSettlementStore, x402Facilitator } from "@x402/core/facilitator";
import type {
  PaymentPayload,
  PaymentRequirements,
  SchemeNetworkFacilitator,
} from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm/exact/facilitator";
import { UptoEvmScheme } from "@x402/evm/upto/facilitator";
import { BatchSettlementEvmScheme } from "@x402/evm/batch-settlement/facilitator";
import type { LocalAccount } from "viem/accounts";
import { isAddress, type Hex, type PublicClient } from "viem";
import { findEvmNetwork, type EvmNetwork } from "./networks.js";
import { Reason } from "../../protocol/reasons.js";
import { EvmReason, evmPublicReason } from "./reasons.js";
import { networkNotServed, probeNetworks } from "../familySupport.js";
import type {
  ChainFamily,
  NetworkProbe,
  PendingSettlement,
  PreparedPayment,
  ReconcileOutcome,
  TransactionPhase,
  FailureCause,
} from "../ports.js";
import {
  evmAuthorizationKey,
  evmPayerOf,
  evmQuotaUnits,
  evmRepeatable,
  evmReplayReason,
} from "./payment/paymentIdentity.js";
import { chainTimings } from "./chainTimings.js";
import { foreignRefundClaim } from "./payment/refundClaims.js";
import { RpcHealth } from "./rpc/rpcHealth.js";
import {
  evmBatchPayloadShapeError,
  evmExactPayloadShapeError,
  evmUptoPayloadShapeError,
} from "./payment/payloadShape.js";
import type { Logger } from "../../lib/logger.js";
import type { SignerLeases } from "../ports.js";
import { FeeOracle } from "./rpc/feeOracle.js";
import {
  noopJournal,
  unrecordedFundings,
  type SponsoredFundings,
  type TransactionJournal,
} from "../ports.js";
import { reconcileEvmSettlement } from "./payment/reconcile.js";
import { relandEvmSettlement } from "./payment/reland.js";
import { receiptOrNone } from "./payment/offTheChain.js";
import { TransferCheckedScheme } from "./payment/promisedTransfer.js";
import { evmFailureCause } from "./payment/failureCause.js";
import { chainFor, createEvmPublicClient, type RpcBatching } from "./rpc/rpc.js";
import { createEvmSigner } from "./signer/signer.js";
import { EvmSignerPool } from "./signer/signerPool.js";
import { TokenDomainCache } from "./payment/tokenDomain.js";
import { ApprovalSponsor } from "./sponsoring/approvalSponsor.js";
import { ERC20_APPROVAL_KEY } from "./sponsoring/approveRules.js";
import { eip2612Refusal } from "./sponsoring/permitSponsoring.js";
import type { Erc20ApprovalGasSponsoringFacilitatorExtension } from "@x402/extensions";
import { collectThroughVault } from "./confidential/collectingSigner.js";

interface EvmNetworkSetup {
  id: string;
  rpcUrls: readonly string[];
  /** Highest maxFeePerGas (wei) this network may cost; undefined = no ceiling. */
  maxGasPriceWei?: bigint | undefined;
  /** How often this chain makes a block, when not what the registry says (a devnet's). */
  blockTimeMs?: number | undefined;
}

export interface RegisterEvmOptions {
  networks: readonly EvmNetworkSetup[];
  privateKeys: readonly Hex[];
  confirmationTimeoutMs: number;
  log: Logger;
  journal?: TransactionJournal;
  /** Gas given to payers for their approve (erc20ApprovalGasSponsoring): once each, budgeted. */
  sponsoredFundings?: SponsoredFundings;
  /** Shared store so a settle retry on another replica reconciles (see @x402/core). */
  pendingSettlementStore?: PendingSettlementStore;
  /**
   * RPC polling interval (and how long viem caches the block number); the
   * receipt watcher's tick too. Defaults: an eighth of the block time for
   * polling, a twentieth for receipts.
   */
  pollingIntervalMs?: number;
  /** Replace a transaction not mined after this long; defaults to 3 block times, at least 5 s. */
  stuckAfterMs?: number;
  /** Signers below this balance leave the rotation. Default 0.002 ETH; 0 disables. */
  minSignerBalanceWei?: bigint;
  /** The most gas one settlement transaction may be given. */
  maxGasPerTransaction?: bigint;
  /**
   * Each network's hourly budget (wei) for transactions that fail on-chain,
   * in flight included (src/chains/failedFeeBudget.ts): by chain id, and `default`.
   */
  failedGasBudgetWei?: { default: bigint | undefined; byChainId: ReadonlyMap<number, bigint> };
  onFailedGasBudget?: (network: string, budget: number) => void;
  onSignerHealth?: (network: string, address: string, healthy: boolean, balanceWei: bigint) => void;
  onTransactionPhase?: (network: string, phase: TransactionPhase, seconds: number) => void;
  onFeePaid?: (network: string, status: "success" | "reverted", fee: number) => void;
  /** JSON-RPC batching per URL; absent = every call on its own request. */
  rpcBatching?: RpcBatching;
  /** Wallet implementations whose signature check gets the gas allowance from a first payment. */
  knownWalletImplementations?: readonly string[];
  /** Factories allowed to deploy a counterfactual (ERC-6492) payer wallet at settle. */
  eip6492AllowedFactories?: readonly string[];
  /**
   * Co-signs batch-settlement claims and refunds for servers that delegate
   * to this service; advertised as `receiverAuthorizer` in /supported.
   */
  batchAuthorizer?: LocalAccount;
  /** Share the accounts with other replicas through leases. */
  leases?: { port: SignerLeases; holder: string; ttlMs?: number; heartbeatMs?: number };
  /**
   * The confidential settlement vault: `exact` payments to it on its
   * network are submitted to its `collect` (confidential/collectingSigner.ts).
   */
  confidentialVault?: { network: string; address: Hex };
}

interface EvmNetworkRuntime {
  network: EvmNetwork;
  client: PublicClient;
  domains: TokenDomainCache;
  pool: EvmSignerPool;
  health: RpcHealth;
  hosts: string[];
  mechanisms: SchemeNetworkFacilitator[];
  /** `erc20ApprovalGasSponsoring` here: every network offers Permit2 (`upto` needs it). */
  approvals: ApprovalSponsor;
}

export class EvmChainAdapter implements ChainFamily {
  readonly family = "eip155";
  readonly signersKey = "eip155";
  readonly decimalAmounts = false;
  private readonly runtimes = new Map<string, EvmNetworkRuntime>();
  private readonly schemes = new Map<string, readonly string[]>();

  constructor(opts: RegisterEvmOptions) {
    for (const setup of opts.networks) {
      const network = findEvmNetwork(setup.id);
      if (!network) throw new Error(`unknown EVM network ${setup.id}`);
      const timings = chainTimings(setup.blockTimeMs ?? network.blockTimeMs, opts);
      const health = new RpcHealth();
      const client = createEvmPublicClient(
        network,
        setup.rpcUrls,
        timings.pollMs,
        opts.rpcBatching,
        health,
      );
      const fees = new FeeOracle(client, timings.feeMaxAgeMs, setup.maxGasPriceWei);
      const pool = new EvmSignerPool({
        network: network.id,
        chain: chainFor(network, setup.rpcUrls),
        client,
        privateKeys: opts.privateKeys,
        journal: opts.journal ?? noopJournal,
        fees,
        log: opts.log,
        receiptTickMs: timings.receiptTickMs,
        stuckAfterMs: timings.stuckAfterMs,
        minBalanceWei: opts.minSignerBalanceWei ?? 2_000_000_000_000_000n,
        ...(opts.maxGasPerTransaction !== undefined
          ? { maxGasPerTransaction: opts.maxGasPerTransaction }
          : {}),
        ...(opts.leases ? { leases: opts.leases } : {}),
        failedGasBudgetWei:
          opts.failedGasBudgetWei?.byChainId.get(network.chainId) ??
          opts.failedGasBudgetWei?.default,
        onSignerHealth: (address, healthy, balance) =>
          opts.onSignerHealth?.(network.id, address, healthy, balance),
        onPhase: (phase, seconds) => opts.onTransactionPhase?.(network.id, phase, seconds),
        onFeePaid: (status, wei) => opts.onFeePaid?.(network.id, status, Number(wei) / 1e18),
      });
      if (pool.failedGasBudgetWei !== undefined) {
        opts.onFailedGasBudget?.(network.id, Number(pool.failedGasBudgetWei) / 1e18);
      }
      const signer = createEvmSigner({
        publicClient: client,
        fees,
        pool,
        confirmationTimeoutMs: opts.confirmationTimeoutMs,
        ...(opts.knownWalletImplementations
          ? { knownWalletImplementations: opts.knownWalletImplementations }
          : {}),
      });
      // One mechanism instance per network and scheme: a signer is bound to
      // one chain. The pending store lets a retry on another replica
      // reconcile against the first broadcast instead of sending again.
      const pending = opts.pendingSettlementStore
        ? { pendingSettlementStore: opts.pendingSettlementStore }
        : {};
      const factories = { eip6492AllowedFactories: [...(opts.eip6492AllowedFactories ?? [])] };
      // On the vault's network, a payment to the vault goes through its collect.
      const vault = opts.confidentialVault;
      const exactSigner =
        vault?.network === network.id ? collectThroughVault(signer, vault) : signer;
      const mechanisms: SchemeNetworkFacilitator[] = [
        new ExactEvmScheme(exactSigner, { ...pending, ...factories }),
        new UptoEvmScheme(signer, pending),
        // Its success is checked against the transfer it promised (promisedTransfer.ts).
        new TransferCheckedScheme(
          new BatchSettlementEvmScheme(signer, opts.batchAuthorizer, { ...pending, ...factories }),
          (hash) => client.getTransactionReceipt({ hash }),
        ),
      ];
      this.schemes.set(
        network.id,
        mechanisms.map((m) => m.scheme),
      );
      this.runtimes.set(network.id, {
        network,
        client,
        domains: new TokenDomainCache(client, network.chainId),
        pool,
        health,
        hosts: setup.rpcUrls.map((u) => new URL(u).host),
        mechanisms,
        approvals: new ApprovalSponsor({
          network: network.id,
          chainId: network.chainId,
          client,
          pool,
          signer,
          fees,
          journal: opts.journal ?? noopJournal,
          fundings: opts.sponsoredFundings ?? unrecordedFundings,
          opStack: network.opStack === true,
          ...(opts.maxGasPerTransaction !== undefined
            ? { maxGasPerTransaction: opts.maxGasPerTransaction }
            : {}),
          confirmationTimeoutMs: opts.confirmationTimeoutMs,
        }),
      });
    }
  }

  register(engine: x402Facilitator): void {
    for (const r of this.runtimes.values()) {
      for (const m of r.mechanisms) engine.register(r.network.id, m);
    }
    // The extension is one entry on the engine (and in /supported), but its
    // signer belongs to a network: the mechanisms ask for the one of the
    // payment's network. Only the family holds those, so it registers it.
    const approvals: Erc20ApprovalGasSponsoringFacilitatorExtension = {
      key: ERC20_APPROVAL_KEY,
      signerForNetwork: (network) => this.runtimes.get(network)?.approvals.signer,
    };
    if (this.runtimes.size > 0) engine.registerExtension(approvals);
  }

  payerOf(payload: PaymentPayload, requirements: PaymentRequirements): string | undefined {
    return evmPayerOf(payload, requirements);
  }

  authorizationKey(payload: PaymentPayload, requirements: PaymentRequirements): string | undefined {
    return evmAuthorizationKey(payload, requirements);
  }

  quotaUnits(payload: PaymentPayload, requirements: PaymentRequirements): number {
    return evmQuotaUnits(payload, requirements);
  }

  replayReason(payload: PaymentPayload): string {
    return evmReplayReason(payload);
  }

  repeatable(payload: PaymentPayload, requirements: PaymentRequirements): boolean {
    return evmRepeatable(payload, requirements);
  }

  pendingKey(payload: PaymentPayload): string | undefined {
    // @x402/evm keeps a settle's pending transaction under the payload's
    // signature (its PendingSettlementStore's key).
    const signature = (payload.payload as { signature?: unknown }).signature;
    return typeof signature === "string" ? signature : undefined;
  }

  publicReason(reason: string): string {
    return evmPublicReason(reason);
  }

  async identity(network: string): Promise<string | undefined> {
    const block = await this.runtimes.get(network)?.client.getBlock({ blockNumber: 0n });
    return block?.hash ?? undefined;
  }

  rpcFailedSince(network: string, sinceMs: number): boolean {
    return this.runtimes.get(network)?.health.failedSince(sinceMs) ?? false;
  }

  probe(): Promise<NetworkProbe[]> {
    return probeNetworks(
      [...this.runtimes.values()].map((r) => ({
        network: r.network.id,
        host: r.hosts.join(","),
        read: () => r.client.getBlockNumber({ cacheTime: 0 }),
      })),
    );
  }

  networks(): ReadonlyMap<string, readonly string[]> {
    return this.schemes;
  }

  /** Starts each network's signer pool (gas-balance checks). */
  async start(): Promise<void> {
    await Promise.all([...this.runtimes.values()].map((r) => r.pool.start()));
  }

  /** What became of an interrupted settlement (see reconcile.ts). */
  reconcile(pending: PendingSettlement): Promise<ReconcileOutcome> {
    const runtime = this.runtimes.get(pending.network);
    if (!runtime) return Promise.resolve(networkNotServed(pending.network));
    return reconcileEvmSettlement(
      runtime.client,
      pending.request,
      pending.transactions.map((t) => ({
        hash: t.reference as Hex,
        raw: String(t.detail["raw"] ?? "0x") as Hex,
      })),
    );
  }

  /**
   * Answers success once its receipt is mined, short of finality: a reorg
   * can take a success back, so the reorg watch follows its networks.
   */
  readonly successIsFinal = false;

  /**
   * The transactions whose receipts the node still holds, succeeded: asked
   * together (the calls leave as JSON-RPC batches where the node takes
   * them, rpc.ts), where `reconcile` would read each one's journal first.
   * The same signed call that succeeds again moves the same amount (the
   * token's transfer reverts the whole transaction when it cannot). A read
   * that fails leaves its transaction out, for `reconcile` to ask.
   */
  async stillLanded(network: string, references: readonly string[]): Promise<ReadonlySet<string>> {
    const landed = new Set<string>();
    const runtime = this.runtimes.get(network);
    if (!runtime) return landed;
    await Promise.all(
      references.map(async (reference) => {
        const receipt = await receiptOrNone(runtime.client, reference as Hex).catch(
          () => undefined,
        );
        if (receipt?.status === "success") landed.add(reference);
      }),
    );
    return landed;
  }

  /** A reorged success whose transaction lost its nonce, sent again (see reland.ts). */
  reland(pending: PendingSettlement & { id: string }): Promise<ReconcileOutcome> {
    const runtime = this.runtimes.get(pending.network);
    if (!runtime) return Promise.resolve(networkNotServed(pending.network));
    return relandEvmSettlement(runtime.pool, runtime.client, pending);
  }

  /** Who caused a settlement that failed on-chain (failureCause.ts). */
  failureCause(
    payload: PaymentPayload,
    requirements: PaymentRequirements,
    transaction?: string,
  ): Promise<FailureCause> {
    const runtime = this.runtimes.get(requirements.network);
    if (!runtime) return Promise.resolve("requirements");
    return evmFailureCause(runtime.client, payload, requirements, transaction);
  }

  async currentBlock(network: string): Promise<bigint | undefined> {
    const runtime = this.runtimes.get(network);
    // viem caches the answer for one polling interval (an eighth of a block).
    return runtime ? runtime.client.getBlockNumber() : undefined;
  }

  shapeError(payload: PaymentPayload, requirements: PaymentRequirements): string | undefined {
    const body = payload.payload as Record<string, unknown>;
    if (requirements.scheme === "exact") return evmExactPayloadShapeError(body);
    if (requirements.scheme === "upto") return evmUptoPayloadShapeError(body);
    if (requirements.scheme === "batch-settlement") return evmBatchPayloadShapeError(body);
    return undefined;
  }

  async prepare(
    payload: PaymentPayload,
    requirements: PaymentRequirements,
  ): Promise<PreparedPayment> {
    const runtime = this.runtimes.get(requirements.network);
    if (!runtime) {
      return {
        ok: false,
        reason: Reason.invalidNetwork,
        message: `network ${requirements.network} is not served`,
      };
    }
    if (!isAddress(requirements.asset, { strict: false })) {
      return {
        ok: false,
        reason: Reason.invalidPaymentRequirements,
        message: "paymentRequirements.asset must be a 0x-prefixed 20-byte token address",
      };
    }
    if (!isAddress(requirements.payTo, { strict: false })) {
      return {
        ok: false,
        reason: Reason.invalidPaymentRequirements,
        message: "paymentRequirements.payTo must be a 0x-prefixed 20-byte address",
      };
    }
    const inner = payload.payload as Record<string, unknown>;
    const foreign = foreignRefundClaim(inner, requirements.network);
    if (foreign) return { ok: false, reason: Reason.invalidPayload, message: foreign };
    const permit = eip2612Refusal(payload, requirements);
    if (permit) return { ok: false, ...permit };
    const approval = await runtime.approvals.check(payload, requirements);
    if (!approval.ok) return approval;
    if (!("authorization" in inner)) return { ok: true, requirements };
    return this.withTokenDomain(runtime, requirements);
  }

  /** Fills in or checks `extra.name` / `extra.version` against the token itself. */
  private async withTokenDomain(
    runtime: EvmNetworkRuntime,
    requirements: PaymentRequirements,
  ): Promise<PreparedPayment> {
    const domain = await runtime.domains.get(requirements.asset as Hex);
    if (!domain || !domain.confirmed) return { ok: true, requirements };
    const extra = requirements.extra ?? {};
    const name = typeof extra["name"] === "string" ? extra["name"] : undefined;
    const version = typeof extra["version"] === "string" ? extra["version"] : undefined;
    if (name !== undefined && name !== domain.name) {
      return {
        ok: false,
        reason: EvmReason.eip712DomainMismatch,
        message: `paymentRequirements.extra.name is "${name}" but the token's EIP-712 domain name is "${domain.name}"`,
      };
    }
    if (version !== undefined && version !== domain.version) {
      return {
        ok: false,
        reason: EvmReason.eip712DomainMismatch,
        message: `paymentRequirements.extra.version is "${version}" but the token's EIP-712 domain version is "${domain.version}"`,
      };
    }
    if (name !== undefined && version !== undefined) return { ok: true, requirements };
    return {
      ok: true,
      requirements: {
        ...requirements,
        extra: { ...extra, name: domain.name, version: domain.version },
      },
    };
  }

  async close(): Promise<void> {
    for (const r of this.runtimes.values()) {
      await r.pool.release();
      r.pool.stop();
    }
  }
}
