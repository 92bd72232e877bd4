/**
 * The NEAR family: the `exact` mechanism on each configured NEAR network,
 * relayed by the facilitator's own accounts, with what the service asks of
 * every family: the payer and the authorization key of a payload (the
 * payer's key and the delegate nonce, so copies of one authorization meet
 * durably and across replicas), reconciliation from the chain, and
 * reachability.
 */
import type { x402Facilitator } from "@x402/core/facilitator";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { KeyPair, type KeyPairString } from "@near-js/crypto";
import { baseDecode } from "@near-js/utils";
import { Reason } from "../../protocol/reasons.js";
import { findNearNetwork, type NearNetwork } from "./networks.js";
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
import {
  ExactNearScheme,
  causeOfNearFailure,
  type FinalBlock,
  type NearSchemeSettings,
} from "./exactScheme.js";
import { NearRelayers } from "./relayers.js";
import { NearRpc } from "./rpc.js";
import { NearReason } from "./reasons.js";
import { decodeDelegate, delegateKey, signedDelegateOf } from "./signedDelegate.js";
import { FailedFeeBudget } from "../failedFeeBudget.js";

export interface NearSetup {
  networks: readonly { id: string; rpcUrl: string }[];
  /** Relayer keys: `account_id:ed25519:<base58 secret>` each. Never logged. */
  relayerKeys: readonly string[];
}

export type NearSettings = Pick<NearSchemeSettings, "minGas" | "maxGas" | "minBlockSeconds"> & {
  minRelayerBalanceYocto: bigint;
  /** Hourly budget (yoctoNEAR) for fees of transactions that fail on-chain; undefined: none. */
  failedFeeBudgetYocto?: bigint | undefined;
};

interface NearRuntime {
  network: NearNetwork;
  rpc: NearRpc;
  relayers: NearRelayers;
  scheme: ExactNearScheme;
  failedFees: FailedFeeBudget;
  /** The final block, read at most every 250 ms however many ask. */
  final: RecentRead<FinalBlock>;
}

/** `account:ed25519:secret` → the account and its key pair. */
/** Yocto (10^-24) to whole NEAR for a metric, keeping six decimals. */
function nearOf(yocto: bigint): number {
  return Number(yocto / 10n ** 18n) / 1e6;
}

function parseRelayerKey(entry: string): { accountId: string; keyPair: KeyPair } {
  const at = entry.indexOf(":");
  const accountId = entry.slice(0, at);
  const secret = entry.slice(at + 1);
  if (at <= 0 || !/^(ed25519|secp256k1):[1-9A-HJ-NP-Za-km-z]+$/.test(secret)) {
    throw new Error("a NEAR relayer key must read account_id:ed25519:<base58 secret key>");
  }
  return { accountId, keyPair: KeyPair.fromString(secret as KeyPairString) };
}

export class NearChainAdapter implements ChainFamily {
  readonly family = "near";
  readonly signersKey = "near";
  readonly decimalAmounts = false;
  private readonly runtimes = new Map<string, NearRuntime>();
  private readonly schemes = new Map<string, readonly string[]>();

  constructor(setup: NearSetup, settings: NearSettings, ctx: FamilyContext) {
    const keys = setup.relayerKeys.map(parseRelayerKey);
    for (const { id, rpcUrl } of setup.networks) {
      const network = findNearNetwork(id);
      if (!network) throw new Error(`unknown NEAR network ${id}`);
      const rpc = new NearRpc({ network: id, url: rpcUrl });
      const journal = ctx.journal;
      const failedFees = new FailedFeeBudget(
        id,
        settings.failedFeeBudgetYocto,
        Date.now,
        journal.failedFeeExposure ? (since) => journal.failedFeeExposure!(id, since) : undefined,
      );
      if (failedFees.budget !== undefined) ctx.onFailedGasBudget?.(id, nearOf(failedFees.budget));
      // The gas price moves by small steps from block to block: one read serves a few seconds of sends.
      const gasPrice = new RecentRead(
        () =>
          rpc
            .call<{ gas_price: string }>("gas_price", [null])
            .then(({ gas_price }) => BigInt(gas_price)),
        5_000,
      );
      const relayers = new NearRelayers({
        failedFees,
        gasPrice: () => gasPrice.get(),
        ...(ctx.onFeePaid
          ? { onFeePaid: (status, yocto) => ctx.onFeePaid!(id, status, nearOf(yocto)) }
          : {}),
        network: id,
        rpc,
        keys,
        journal: ctx.journal,
        log: ctx.log,
        minBalanceYocto: settings.minRelayerBalanceYocto,
        onSignerHealth: (account, healthy, yocto) =>
          ctx.onSignerHealth(
            id,
            account,
            healthy,
            nearOf(yocto),
            nearOf(settings.minRelayerBalanceYocto),
          ),
        leases: ctx.leases,
      });
      const final = new RecentRead(
        () =>
          rpc
            .call<{ header: { height: number; hash: string } }>("block", { finality: "final" })
            .then((b) => ({ height: BigInt(b.header.height), hash: baseDecode(b.header.hash) })),
        250,
      );
      const scheme = new ExactNearScheme(network, rpc, relayers, () => final.get(), ctx.journal, {
        ...settings,
        settleTimeoutMs: ctx.settleTimeoutMs,
        pollMs: ctx.pollingIntervalMs ?? 500,
      });
      this.runtimes.set(id, { network, rpc, relayers, scheme, failedFees, final });
      this.schemes.set(id, ["exact"]);
    }
  }

  networks(): ReadonlyMap<string, readonly string[]> {
    return this.schemes;
  }

  register(engine: x402Facilitator): void {
    for (const r of this.runtimes.values())
      engine.register(r.network.id as `${string}:${string}`, r.scheme);
  }

  async start(): Promise<void> {
    await Promise.all(
      [...this.runtimes.values()].map(async (r) => {
        await r.final.get();
        // A restarted process remembers the hour's failures of every replica.
        await Promise.all([r.relayers.start(), r.failedFees.refresh()]);
      }),
    );
  }

  async close(): Promise<void> {
    await Promise.all([...this.runtimes.values()].map((r) => r.relayers.stop()));
  }

  /** Who caused a settlement that failed on-chain: nearcore's failure for its receipt. */
  async failureCause(
    payload: PaymentPayload,
    requirements: PaymentRequirements,
  ): Promise<FailureCause> {
    return this.runtimes.get(requirements.network)?.scheme.failureCause(payload) ?? "requirements";
  }

  payerOf(payload: PaymentPayload): string | undefined {
    return decodeDelegate(payload)?.senderId;
  }

  authorizationKey(payload: PaymentPayload, requirements: PaymentRequirements): string | undefined {
    const d = decodeDelegate(payload);
    return d ? `${requirements.network}:delegate:${delegateKey(d)}` : undefined;
  }

  /** A consumed (or reused) delegate-action nonce, as NEAR's own check reports it. */
  replayReason(): string {
    return NearReason.nonce;
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
    if (!signedDelegateOf(payload)) {
      return "paymentPayload.payload.signedDelegateAction must be a base64 Borsh NEP-366 SignedDelegate";
    }
    return unknownPayloadField(payload, ["signedDelegateAction"]);
  }

  async prepare(
    _payload: PaymentPayload,
    requirements: PaymentRequirements,
  ): Promise<PreparedPayment> {
    if (!/^[a-z0-9._-]{2,64}$/.test(requirements.asset)) {
      return {
        ok: false,
        reason: Reason.invalidPaymentRequirements,
        message: "asset must be the NEAR account id of an NEP-141 token contract",
      };
    }
    if (!/^\d+$/.test(requirements.amount)) {
      return {
        ok: false,
        reason: Reason.invalidPaymentRequirements,
        message: "amount must be atomic units (digits)",
      };
    }
    return { ok: true, requirements };
  }

  async currentBlock(network: string): Promise<bigint | undefined> {
    const r = this.runtimes.get(network);
    return r ? (await r.final.get()).height : undefined;
  }

  /** The genesis hash nearcore reports: a different one means another chain. */
  async identity(network: string): Promise<string | undefined> {
    const r = this.runtimes.get(network);
    if (!r) return undefined;
    const status = await r.rpc.call<{ genesis_hash?: string }>("status", []);
    return status.genesis_hash;
  }

  /** Its RPC client throws `ChainUnavailableError` itself when the chain cannot be asked. */
  rpcFailedSince(): boolean {
    return false;
  }

  probe(): Promise<NetworkProbe[]> {
    return probeNetworks(
      [...this.runtimes.values()].map((r) => ({
        network: r.network.id,
        host: r.rpc.host,
        read: () => r.rpc.call("status", []),
      })),
    );
  }

  /** A success is answered once its transaction is in a final block, which no fork takes back. */
  readonly successIsFinal = true;

  /** No read confirms several successes at once; none is needed, its successes being final. */
  readonly stillLanded = null;

  /** Sends no reorged success again: its successes are final, so no reorg takes one back. */
  readonly reland = null;

  /**
   * From the chain alone: a final transaction decides it. One the node does
   * not know is sent again with the same bytes while the delegate can still
   * run; once the chain is past the delegate's `max_block_height` it can
   * never move money, and nothing did.
   */
  async reconcile(pending: PendingSettlement): Promise<ReconcileOutcome> {
    const r = this.runtimes.get(pending.network);
    if (!r) return networkNotServed(pending.network);
    const latest = pending.transactions[pending.transactions.length - 1];
    if (!latest) return nothingWasSent();
    const relayer = String(latest.detail["relayer"] ?? latest.signer ?? "");
    const asset = String(latest.detail["asset"] ?? pending.request.paymentRequirements.asset);
    const status = await r.scheme.status(latest.reference, relayer, asset);
    if (status.state === "final") {
      return status.ok
        ? { status: "succeeded", transaction: latest.reference }
        : {
            status: "failed",
            reason: status.reason,
            message: status.message,
            transaction: latest.reference,
            cause: causeOfNearFailure(status.reason),
          };
    }
    if (status.state === "waiting") return { status: "pending", transaction: latest.reference };
    const final = await r.final.get();
    const maxBlockHeight = BigInt(String(latest.detail["maxBlockHeight"] ?? "0"));
    if (final.height > maxBlockHeight + 2n) {
      return {
        status: "failed",
        reason: NearReason.expired,
        message: `the relayed transaction never landed and the delegate action expired at block ${maxBlockHeight}; nothing was transferred by this service`,
      };
    }
    const bytes = latest.detail["signedTransaction"];
    if (typeof bytes === "string") {
      await r.rpc
        .call("send_tx", { signed_tx_base64: bytes, wait_until: "NONE" })
        .catch(() => undefined);
    }
    return { status: "pending", transaction: latest.reference };
  }
}

export function createNear(
  setup: NearSetup,
  settings: NearSettings,
  ctx: FamilyContext,
): NearChainAdapter {
  return new NearChainAdapter(setup, settings, ctx);
}
