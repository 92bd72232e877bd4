/**
 * The Solana family: registers the official `@x402/svm` facilitator `exact`
 * scheme on each configured Solana network, with this service's fee payers,
 * RPC and limits, and adds what the official scheme leaves to the facilitator:
 * fee payers offered in rotation, compute caps, a clear refusal for a payTo
 * without a token account, confirmation within the time budget, and
 * reconciliation of a settlement whose process stopped.
 *
 * Duplicates of one signed transaction meet in the service by
 * `authorizationKey` (the message hash), durably and across replicas; the
 * scheme's own in-memory duplicate cache is only a second line.
 */
import type { x402Facilitator } from "@x402/core/facilitator";
import type {
  PaymentPayload,
  PaymentRequirements,
  SchemeNetworkFacilitator,
} from "@x402/core/types";
import { ExactSvmScheme } from "@x402/svm/exact/facilitator";
import {
  address,
  createKeyPairSignerFromBytes,
  getBase58Encoder,
  getBase64Encoder,
  getCompiledTransactionMessageDecoder,
  getTransactionDecoder,
  type Address,
  type KeyPairSigner,
  type Signature,
} from "@solana/kit";
import { TOKEN_PROGRAM_ADDRESS, findAssociatedTokenPda } from "@solana-program/token";
import { Reason } from "../../protocol/reasons.js";
import {
  networkNotServed,
  nothingWasSent,
  probeNetworks,
  RecentRead,
  unknownPayloadField,
} from "../familySupport.js";
import { findSvmNetwork, type SvmNetwork } from "./networks.js";
import type {
  ChainFamily,
  FailureCause,
  FamilyContext,
  NetworkProbe,
  PendingSettlement,
  PreparedPayment,
  ReconcileOutcome,
} from "../ports.js";
import {
  STATUSES_PER_CALL,
  SvmFeePayers,
  describeChainError,
  type Commitment,
} from "./feePayers.js";
import { svmAuthorizationKey, svmPayerOf, svmShapeError } from "./paymentIdentity.js";
import { FailedFeeBudget } from "../failedFeeBudget.js";
import { svmFailureCause, tokenAccountFields } from "./failures.js";
import { rememberBounded } from "../../lib/boundedMap.js";
import { SvmReason } from "./reasons.js";

export interface SvmSetup {
  networks: readonly { id: string; rpcUrl: string }[];
  /** Fee-payer secret keys: base58 of 64 bytes (seed and public key). Never logged. */
  secretKeys: readonly string[];
}

export interface SvmSettings {
  commitment: Commitment;
  /** Highest compute-unit limit a payment's transaction may set. */
  maxComputeUnits: number;
  /** Highest compute-unit price (micro-lamports) a payment may make our fee payer pay. */
  maxPriorityFeeMicroLamports: number;
  /** Fee payers below this many lamports leave the rotation. */
  minFeePayerLamports: bigint;
  /** Hourly budget (lamports) for fees of transactions that fail on-chain; undefined: none. */
  failedFeeBudgetLamports?: bigint | undefined;
}

/** How long a token account seen to exist is taken to still exist. */
const TOKEN_ACCOUNT_KEPT_MS = 60_000;
/** How many token accounts are remembered at most (the oldest go first). */
const TOKEN_ACCOUNTS_KEPT = 10_000;

export const SVM_PAY_TO_WITHOUT_TOKEN_ACCOUNT = SvmReason.payToTokenAccountMissing;

/** The official scheme, offering its fee payers in rotation instead of at random. */
class RotatingExactSvmScheme extends ExactSvmScheme {
  constructor(
    private readonly feePayers: SvmFeePayers,
    options: ConstructorParameters<typeof ExactSvmScheme>[2],
  ) {
    super(feePayers.signer, undefined, options);
  }

  override getExtra(network: string): Record<string, unknown> | undefined {
    return { ...super.getExtra(network), feePayer: this.feePayers.next() };
  }
}

interface SvmRuntime {
  network: SvmNetwork;
  feePayers: SvmFeePayers;
  failedFees: FailedFeeBudget;
  mechanism: SchemeNetworkFacilitator;
  host: string;
  /** The last slot read, and the read in flight: concurrent verifications share one. */
  /** The confirmed slot, read at most every 100 ms however many ask (the verify cache's key). */
  slot: RecentRead<bigint>;
  /** Token accounts known to exist, or being looked up (one lookup however many ask). */
  tokenAccounts: Map<string, { at: number; exists: Promise<boolean> }>;
  /** Associated token accounts by owner and mint, derived once. */
  associatedAccounts: Map<string, Promise<Address>>;
}

export class SvmChainAdapter implements ChainFamily {
  readonly family = "solana";
  readonly signersKey = "solana";
  readonly decimalAmounts = false;
  private readonly runtimes = new Map<string, SvmRuntime>();
  private readonly schemes = new Map<string, readonly string[]>();

  constructor(
    setup: SvmSetup,
    keys: readonly KeyPairSigner[],
    settings: SvmSettings,
    ctx: FamilyContext,
  ) {
    const log = ctx.log.child({ component: "svm" });
    for (const { id, rpcUrl } of setup.networks) {
      const network = findSvmNetwork(id);
      if (!network) throw new Error(`unknown Solana network ${id}`);
      const journal = ctx.journal;
      const failedFees = new FailedFeeBudget(
        id,
        settings.failedFeeBudgetLamports,
        Date.now,
        journal.failedFeeExposure ? (since) => journal.failedFeeExposure!(id, since) : undefined,
      );
      if (failedFees.budget !== undefined) {
        ctx.onFailedGasBudget?.(id, Number(failedFees.budget) / 1e9);
      }
      const feePayers = new SvmFeePayers({
        failedFees,
        ...(ctx.onFeePaid
          ? { onFeePaid: (status, lamports) => ctx.onFeePaid!(id, status, Number(lamports) / 1e9) }
          : {}),
        network: id,
        rpcUrl,
        keys,
        journal: ctx.journal,
        log,
        commitment: settings.commitment,
        confirmTimeoutMs: ctx.settleTimeoutMs,
        minLamports: settings.minFeePayerLamports,
        onSignerHealth: (a, healthy, lamports) =>
          ctx.onSignerHealth(
            id,
            a,
            healthy,
            Number(lamports) / 1e9,
            Number(settings.minFeePayerLamports) / 1e9,
          ),
        ...(ctx.onTransactionPhase
          ? { onPhase: (phase, seconds) => ctx.onTransactionPhase?.(id, phase, seconds) }
          : {}),
        ...(ctx.pollingIntervalMs !== undefined ? { pollMs: ctx.pollingIntervalMs } : {}),
      });
      this.runtimes.set(id, {
        network,
        feePayers,
        failedFees,
        mechanism: new RotatingExactSvmScheme(feePayers, {
          maxComputeUnits: settings.maxComputeUnits,
          maxPriorityFeeMicroLamports: settings.maxPriorityFeeMicroLamports,
        }),
        host: new URL(rpcUrl).host,
        slot: new RecentRead(() => feePayers.rpc.getSlot({ commitment: "confirmed" }).send(), 100),
        tokenAccounts: new Map(),
        associatedAccounts: new Map(),
      });
      this.schemes.set(id, ["exact"]);
    }
  }

  networks(): ReadonlyMap<string, readonly string[]> {
    return this.schemes;
  }

  rpcFailedSince(network: string, sinceMs: number): boolean {
    return (this.runtimes.get(network)?.feePayers.lastTransportFailure ?? 0) >= sinceMs;
  }

  register(engine: x402Facilitator): void {
    for (const r of this.runtimes.values()) {
      engine.register(r.network.id as `${string}:${string}`, r.mechanism);
    }
  }

  async start(): Promise<void> {
    await Promise.all(
      // A restarted process remembers the hour's failures of every replica.
      [...this.runtimes.values()].map((r) =>
        Promise.all([r.feePayers.start(), r.failedFees.refresh()]),
      ),
    );
  }

  /** Who caused a settlement that failed on-chain (failures.ts): the payer's token account tells. */
  async failureCause(
    payload: PaymentPayload,
    requirements: PaymentRequirements,
  ): Promise<FailureCause> {
    const runtime = this.runtimes.get(requirements.network);
    if (!runtime) return "requirements";
    return svmFailureCause(payload, requirements, async (account) => {
      const { value } = await runtime.feePayers.rpc
        .getAccountInfo(account, { encoding: "base64", commitment: "confirmed" })
        .send();
      if (!value) return undefined;
      return tokenAccountFields(getBase64Encoder().encode(value.data[0]) as Uint8Array);
    });
  }

  async close(): Promise<void> {
    for (const r of this.runtimes.values()) r.feePayers.stop();
  }

  payerOf(payload: PaymentPayload): string | undefined {
    return svmPayerOf(payload);
  }

  authorizationKey(payload: PaymentPayload, requirements: PaymentRequirements): string | undefined {
    return svmAuthorizationKey(payload, requirements);
  }

  /** No nonce reason of its own: a replayed authorization is answered `duplicate_settlement`. */
  replayReason(): string {
    return Reason.duplicateSettlement;
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
    return svmShapeError(payload) ?? unknownPayloadField(payload, ["transaction"]);
  }

  /** A payTo without a token account for the asset cannot be paid by `exact`: say what to do. */
  async prepare(
    _payload: PaymentPayload,
    requirements: PaymentRequirements,
  ): Promise<PreparedPayment> {
    const runtime = this.runtimes.get(requirements.network);
    if (!runtime) {
      return {
        ok: false,
        reason: Reason.invalidNetwork,
        message: `${requirements.network} is not served`,
      };
    }
    let owner, mint;
    try {
      owner = address(requirements.payTo);
      mint = address(requirements.asset);
    } catch {
      return {
        ok: false,
        reason: Reason.invalidPaymentRequirements,
        message: "paymentRequirements.payTo and .asset must be base58 Solana addresses",
      };
    }
    const ata = await this.associatedTokenAccount(runtime, owner, mint);
    if (!(await this.tokenAccountExists(runtime, ata))) {
      return {
        ok: false,
        reason: SVM_PAY_TO_WITHOUT_TOKEN_ACCOUNT,
        message: `paymentRequirements.payTo ${requirements.payTo} has no token account for ${requirements.asset}; the resource server must create its associated token account (${ata}) before it can be paid, since an exact payment may not create one`,
      };
    }
    return { ok: true, requirements };
  }

  /**
   * The payTo's associated token account, derived once per owner and mint:
   * the derivation hashes and tests points on the curve, a large share of a
   * verification's CPU, and a merchant's account never changes.
   */
  private associatedTokenAccount(runtime: SvmRuntime, owner: Address, mint: Address) {
    const key = `${owner}:${mint}`;
    const known = runtime.associatedAccounts.get(key);
    if (known) return known;
    const derived = findAssociatedTokenPda({
      owner,
      mint,
      tokenProgram: TOKEN_PROGRAM_ADDRESS,
    }).then(([ata]) => ata);
    // Bounded: any payTo a request names may land here.
    rememberBounded(runtime.associatedAccounts, key, derived, TOKEN_ACCOUNTS_KEPT);
    derived.catch(() => runtime.associatedAccounts.delete(key));
    return derived;
  }

  /**
   * Whether the token account exists, read once for however many ask at the
   * same time, and remembered for a while once it does: every verification
   * and settle to the same payTo would otherwise add a read to the ledger's
   * load, doubling it beside the simulation. Only existence is kept. A
   * missing account may be created at any moment, and a failed read says
   * nothing, so both are asked again next time. An account closed after it
   * was seen still fails the payment's simulation, only with a less specific
   * reason, until the entry expires.
   */
  private tokenAccountExists(runtime: SvmRuntime, ata: Address): Promise<boolean> {
    const known = runtime.tokenAccounts.get(ata);
    if (known && Date.now() - known.at < TOKEN_ACCOUNT_KEPT_MS) return known.exists;
    const exists = runtime.feePayers.rpc
      .getAccountInfo(ata, { encoding: "base64" })
      .send()
      .then(({ value }) => value !== null);
    // Bounded: any payTo a request names may land here.
    rememberBounded(runtime.tokenAccounts, ata, { at: Date.now(), exists }, TOKEN_ACCOUNTS_KEPT);
    const forget = () => {
      if (runtime.tokenAccounts.get(ata)?.exists === exists) runtime.tokenAccounts.delete(ata);
    };
    exists.then((found) => found || forget(), forget);
    return exists;
  }

  async currentBlock(network: string): Promise<bigint | undefined> {
    return this.runtimes.get(network)?.slot.get();
  }

  async identity(network: string): Promise<string | undefined> {
    return this.runtimes.get(network)?.feePayers.rpc.getGenesisHash().send();
  }

  probe(): Promise<NetworkProbe[]> {
    return probeNetworks(
      [...this.runtimes.values()].map((r) => ({
        network: r.network.id,
        host: r.host,
        read: () => r.feePayers.rpc.getSlot().send(),
      })),
    );
  }

  /**
   * The signatures still landed without an error, past `processed`: one
   * status read per 256 (the RPC's most), where `reconcile` takes one each.
   */
  async stillLanded(network: string, references: readonly string[]): Promise<ReadonlySet<string>> {
    const landed = new Set<string>();
    const r = this.runtimes.get(network);
    if (!r) return landed;
    for (let i = 0; i < references.length; i += STATUSES_PER_CALL) {
      const chunk = references.slice(i, i + STATUSES_PER_CALL);
      const { value } = await r.feePayers.rpc
        .getSignatureStatuses(chunk as Signature[], { searchTransactionHistory: true })
        .send();
      chunk.forEach((reference, j) => {
        const status = value[j];
        if (status && !status.err && status.confirmationStatus !== "processed") {
          landed.add(reference);
        }
      });
    }
    return landed;
  }

  /**
   * False whatever `SVM_COMMITMENT` says: a success answered at `confirmed`
   * (the default) can be taken back by a reorg, so the reorg watch follows
   * its networks, as it always has.
   */
  readonly successIsFinal = false;

  /**
   * Cannot send a reorged success again: nothing in this family sends a
   * settlement's call anew. Such a success is recorded failed.
   */
  readonly reland = null;

  /**
   * From the chain alone: a journaled signature that landed decides it; one
   * not found while its blockhash is still valid is re-sent (the same bytes,
   * the same signature) and stays pending; one not found after its blockhash
   * expired never landed.
   */
  async reconcile(pending: PendingSettlement): Promise<ReconcileOutcome> {
    const r = this.runtimes.get(pending.network);
    if (!r) return networkNotServed(pending.network);
    const latest = pending.transactions[pending.transactions.length - 1];
    if (!latest) return nothingWasSent();
    const { value } = await r.feePayers.rpc
      .getSignatureStatuses([latest.reference as Signature], { searchTransactionHistory: true })
      .send();
    const status = value[0];
    if (status?.err) {
      return {
        status: "failed",
        reason: SvmReason.transactionFailed,
        message: `the settlement transaction failed on-chain: ${describeChainError(status.err)}`,
        transaction: latest.reference,
      };
    }
    if (status && status.confirmationStatus !== "processed") {
      return { status: "succeeded", transaction: latest.reference };
    }
    if (status) return { status: "pending", transaction: latest.reference };
    const wire = String(latest.detail["transaction"] ?? "");
    const bytes = getBase64Encoder().encode(wire);
    const message = getCompiledTransactionMessageDecoder().decode(
      getTransactionDecoder().decode(bytes).messageBytes,
    );
    const { value: valid } = await r.feePayers.rpc
      .isBlockhashValid(message.lifetimeToken as never, { commitment: "processed" })
      .send();
    if (!valid) {
      return {
        status: "failed",
        reason: Reason.settlementInterrupted,
        message:
          "the settlement was interrupted and its transaction's blockhash expired without it landing; nothing was transferred",
      };
    }
    await r.feePayers.rpc
      .sendTransaction(wire as never, { encoding: "base64", skipPreflight: true })
      .send()
      .catch(() => undefined);
    return { status: "pending", transaction: latest.reference };
  }
}

/** The family's factory: keys decoded once, never logged. */
export async function createSvm(
  setup: SvmSetup,
  settings: SvmSettings,
  ctx: FamilyContext,
): Promise<SvmChainAdapter> {
  const keys = await Promise.all(
    setup.secretKeys.map((k, i) => {
      try {
        return createKeyPairSignerFromBytes(getBase58Encoder().encode(k));
      } catch {
        throw new Error(`SVM_PRIVATE_KEYS entry ${i + 1} is not a base58 64-byte secret key`);
      }
    }),
  );
  if (keys.length === 0) throw new Error("the Solana family needs at least one fee-payer key");
  return new SvmChainAdapter(setup, keys, settings, ctx);
}
