/**
 * The Starknet family: the `exact` mechanism (SNIP-9 v2 outside execution)
 * on each configured Starknet network, submitted by our executor accounts,
 * with what the service asks of every family: the payer and the
 * authorization key of a payload (the payer and its SNIP-9 nonce, so copies
 * of one authorization meet durably and across replicas), reconciliation
 * from the chain, and reachability.
 */
import type { x402Facilitator } from "@x402/core/facilitator";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { findStarknetNetwork, type StarknetNetwork } from "./networks.js";
import { Reason } from "../../protocol/reasons.js";
import {
  networkNotServed,
  nothingWasSent,
  probeNetworks,
  RecentRead,
  unknownPayloadField,
} from "../familySupport.js";
import type {
  ChainFamily,
  FailureCause,
  FamilyContext,
  NetworkProbe,
  PendingSettlement,
  PreparedPayment,
  ReconcileOutcome,
} from "../ports.js";
import { ExactStarknetScheme, type ExpectedTransfer } from "./exactScheme.js";
import { ExecutorPool, type ExecutorKey } from "./executors.js";
import { BlockReceipts } from "./blockReceipts.js";
import { BlockTicker } from "./blockTicker.js";
import { StarknetReason } from "./reasons.js";
import {
  addressHex,
  feltHex,
  parseFelt,
  parseOutsideExecution,
  payerOf,
  signedMessageHash,
} from "./outsideExecution.js";
import { StarknetRpc } from "./rpc.js";
import { FailedFeeBudget } from "../failedFeeBudget.js";

export interface StarknetSetup {
  networks: readonly { id: string; rpcUrl: string }[];
  /** Executor accounts and their Stark private keys. Never logged. */
  executors: readonly ExecutorKey[];
}

export interface StarknetSettings {
  /** Executors with less STRK (FRI) than this leave the rotation. */
  minExecutorFeeBalance: bigint;
  /** Tolerance for a sequencer timestamp behind the wall clock (time window checks). */
  timeSkewSeconds: number;
  /** The most one settlement may cost an executor, in FRI (STARKNET_MAX_FEE_STRK). */
  maxFeeFri: bigint;
  /** Hourly budget (FRI) for fees of settlements that revert on-chain; undefined: none. */
  failedFeeBudgetFri?: bigint | undefined;
}

interface StarknetRuntime {
  network: StarknetNetwork;
  rpc: StarknetRpc;
  executors: ExecutorPool;
  scheme: ExactStarknetScheme;
  failedFees: FailedFeeBudget;
  /** The latest block number, read at most every 250 ms however many ask. */
  block: RecentRead<number>;
}

export class StarknetChainAdapter implements ChainFamily {
  readonly family = "starknet";
  // The specification keys Starknet signers by the CAIP family pattern.
  readonly signersKey = "starknet:*";
  readonly decimalAmounts = false;
  private readonly runtimes = new Map<string, StarknetRuntime>();
  private readonly schemes = new Map<string, readonly string[]>();

  constructor(setup: StarknetSetup, settings: StarknetSettings, ctx: FamilyContext) {
    const log = ctx.log.child({ component: "starknet" });
    for (const { id, rpcUrl } of setup.networks) {
      const network = findStarknetNetwork(id);
      if (!network) throw new Error(`unknown Starknet network ${id}`);
      const rpc = new StarknetRpc({ network: id, url: rpcUrl, chainId: network.chainId });
      const journal = ctx.journal;
      const failedFees = new FailedFeeBudget(
        id,
        settings.failedFeeBudgetFri,
        Date.now,
        journal.failedFeeExposure ? (since) => journal.failedFeeExposure!(id, since) : undefined,
      );
      if (failedFees.budget !== undefined) {
        ctx.onFailedGasBudget?.(id, Number(failedFees.budget) / 1e18);
      }
      const executors = new ExecutorPool({
        failedFees,
        network: id,
        feeToken: network.feeToken.address,
        keys: setup.executors,
        rpc,
        journal: ctx.journal,
        log,
        minFeeBalance: settings.minExecutorFeeBalance,
        leases: ctx.leases,
        onHealth: (address, healthy, fri) =>
          ctx.onSignerHealth(
            id,
            address,
            healthy,
            Number(fri) / 1e18,
            Number(settings.minExecutorFeeBalance) / 1e18,
          ),
      });
      // One look at the head serves every waiting settle, so it can look
      // more often than each settle used to ask for its receipt.
      const receipts = new BlockReceipts((n) => rpc.ask((p) => p.channel.getBlockWithReceipts(n)));
      const blocks = new BlockTicker(
        () => rpc.ask((p) => p.getBlockNumber()),
        Math.min(ctx.pollingIntervalMs ?? 1000, 250),
        (previous, latest, waiting) => receipts.follow(previous, latest, waiting),
      );
      const scheme = new ExactStarknetScheme(network, rpc, executors, ctx.journal, {
        skewSeconds: settings.timeSkewSeconds,
        settleTimeoutMs: ctx.settleTimeoutMs,
        blocks,
        receipts,
        maxFeeFri: settings.maxFeeFri,
        ...(ctx.onFeePaid ? { onFeePaid: (status, strk) => ctx.onFeePaid!(id, status, strk) } : {}),
      });
      const block = new RecentRead(() => rpc.ask((p) => p.getBlockNumber()), 250);
      this.runtimes.set(id, { network, rpc, executors, scheme, failedFees, block });
      this.schemes.set(id, ["exact"]);
    }
  }

  networks(): ReadonlyMap<string, readonly string[]> {
    return this.schemes;
  }

  register(engine: x402Facilitator): void {
    for (const r of this.runtimes.values()) {
      engine.register(r.network.id as `${string}:${string}`, r.scheme);
    }
  }

  async start(): Promise<void> {
    await Promise.all(
      // A restarted process remembers the hour's failures of every replica.
      [...this.runtimes.values()].map((r) =>
        Promise.all([r.executors.start(), r.failedFees.refresh()]),
      ),
    );
  }

  async close(): Promise<void> {
    for (const r of this.runtimes.values()) r.scheme.close();
    await Promise.all([...this.runtimes.values()].map((r) => r.executors.stop()));
  }

  payerOf(payload: PaymentPayload): string | undefined {
    return payerOf(payload);
  }

  /** Who caused a settlement that reverted on-chain: where its revert arose tells. */
  async failureCause(
    payload: PaymentPayload,
    requirements: PaymentRequirements,
  ): Promise<FailureCause> {
    return this.runtimes.get(requirements.network)?.scheme.failureCause(payload) ?? "requirements";
  }

  /**
   * One SNIP-9 authorization: the payer, its nonce (the account accepts each
   * once) and the SNIP-12 hash of what was signed. Copies of one signed
   * payment meet on this key; a different message reusing a spent nonce
   * does not inherit the first one's answer: it is checked on its own, and
   * the chain refuses its nonce.
   */
  authorizationKey(payload: PaymentPayload, requirements: PaymentRequirements): string | undefined {
    const parsed = parseOutsideExecution(payload);
    if (!parsed.ok) return undefined;
    const { from, nonce } = parsed.oe;
    const signed = signedMessageHash(payload, parsed.oe);
    return `${requirements.network}:snip9:${addressHex(from)}:${feltHex(nonce)}:${signed}`;
  }

  /** A consumed SNIP-9 nonce, as the account contract reports it. */
  replayReason(): string {
    return StarknetReason.nonceUsed;
  }

  /** No payload of this family is an operation anyone may run again. */
  repeatable(): boolean {
    return false;
  }

  /** Its mechanisms' reasons are answered as they give them. */
  publicReason(reason: string): string {
    return reason;
  }

  quotaUnits(): number {
    return 1;
  }

  shapeError(payload: PaymentPayload): string | undefined {
    const parsed = parseOutsideExecution(payload);
    if (!parsed.ok) return parsed.message;
    return unknownPayloadField(payload, ["from", "outsideExecution"]);
  }

  async prepare(
    _payload: PaymentPayload,
    requirements: PaymentRequirements,
  ): Promise<PreparedPayment> {
    if (
      parseFelt(requirements.asset) === undefined ||
      parseFelt(requirements.payTo) === undefined
    ) {
      return {
        ok: false,
        reason: Reason.invalidPaymentRequirements,
        message: "paymentRequirements.asset and .payTo must be Starknet addresses (0x felts)",
      };
    }
    return { ok: true, requirements };
  }

  async currentBlock(network: string): Promise<bigint | undefined> {
    const r = this.runtimes.get(network);
    return r ? BigInt(await r.block.get()) : undefined;
  }

  /** The hash of block 0: a different one means another chain, whose records must not be mixed. */
  async identity(network: string): Promise<string | undefined> {
    const r = this.runtimes.get(network);
    if (!r) return undefined;
    const block = await r.rpc.ask((p) => p.getBlockWithTxHashes(0));
    return "block_hash" in block ? String(block.block_hash) : undefined;
  }

  rpcFailedSince(network: string, sinceMs: number): boolean {
    return (this.runtimes.get(network)?.rpc.lastTransportFailure ?? 0) >= sinceMs;
  }

  probe(): Promise<NetworkProbe[]> {
    return probeNetworks(
      [...this.runtimes.values()].map((r) => ({
        network: r.network.id,
        host: r.rpc.host,
        read: () => r.rpc.ask((p) => p.getBlockNumber()),
      })),
    );
  }

  /**
   * The transactions still accepted in a block and succeeded, by their
   * status alone: asked together, the calls leave as JSON-RPC batches
   * (rpc.ts), and a status is a few fields where a receipt carries every
   * event. The same signed calls that succeed again move the same amount
   * (the token's transfer reverts the whole transaction when it cannot).
   */
  async stillLanded(network: string, references: readonly string[]): Promise<ReadonlySet<string>> {
    const landed = new Set<string>();
    const r = this.runtimes.get(network);
    if (!r) return landed;
    await Promise.all(
      references.map(async (reference) => {
        const status = await r.rpc
          .ask((p) => p.channel.getTransactionStatus(reference))
          .catch(() => undefined);
        const accepted =
          status?.finality_status === "ACCEPTED_ON_L2" ||
          status?.finality_status === "ACCEPTED_ON_L1";
        if (accepted && status.execution_status === "SUCCEEDED") landed.add(reference);
      }),
    );
    return landed;
  }

  /**
   * Answers success at `ACCEPTED_ON_L2`, short of L1 finality: a reorg can
   * take a success back, so the reorg watch follows its networks.
   */
  readonly successIsFinal = false;

  /**
   * Cannot send a reorged success again: nothing in this family sends a
   * settlement's call anew. Such a success is recorded failed.
   */
  readonly reland = null;

  /**
   * From the chain alone: a journaled transaction accepted in a block
   * decides it; one the node still holds stays pending; one the node does
   * not know is re-sent with the same signed bytes while its executor's
   * nonce has not moved past it, and otherwise can never land.
   */
  async reconcile(pending: PendingSettlement): Promise<ReconcileOutcome> {
    const r = this.runtimes.get(pending.network);
    if (!r) return networkNotServed(pending.network);
    const latest = pending.transactions[pending.transactions.length - 1];
    if (!latest) return nothingWasSent();
    const expected = latest.detail["expected"] as Record<string, string> | undefined;
    const want: ExpectedTransfer = {
      asset: BigInt(expected?.["asset"] ?? pending.request.paymentRequirements.asset),
      from: BigInt(expected?.["from"] ?? payerOf(pending.request.paymentPayload) ?? 0),
      to: BigInt(expected?.["to"] ?? pending.request.paymentRequirements.payTo),
      amount: BigInt(expected?.["amount"] ?? pending.request.paymentRequirements.amount),
    };
    const outcome = await r.scheme.outcome(latest.reference, want);
    if (outcome.state === "succeeded")
      return { status: "succeeded", transaction: latest.reference };
    if (outcome.state === "failed") {
      return {
        status: "failed",
        reason: outcome.reason,
        message: outcome.message,
        transaction: latest.reference,
        cause: outcome.cause,
      };
    }
    if (outcome.state === "unknown" && latest.signer) {
      const nonce = BigInt(String(latest.detail["nonce"] ?? "0"));
      const current = BigInt(
        await r.rpc.ask((p) => p.getNonceForAddress(latest.signer!, "latest")),
      );
      if (current > nonce) {
        return {
          status: "failed",
          reason: Reason.settlementInterrupted,
          message:
            "the settlement's transaction never reached the chain and its executor nonce was used since; nothing was transferred",
        };
      }
      const tx = latest.detail["transaction"];
      if (tx && typeof tx === "object") {
        await r.rpc.ask((p) => p.invokeSignedTx(tx as never)).catch(() => undefined);
      }
    }
    return { status: "pending", transaction: latest.reference };
  }
}

export function createStarknet(
  setup: StarknetSetup,
  settings: StarknetSettings,
  ctx: FamilyContext,
): StarknetChainAdapter {
  if (setup.executors.length === 0) {
    throw new Error("the Starknet family needs at least one executor account");
  }
  return new StarknetChainAdapter(setup, settings, ctx);
}
