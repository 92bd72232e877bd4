/**
 * The XRP Ledger family: the keyless `exact` mechanism on each configured
 * XRPL network, with what the service asks of every family: the payer and
 * the authorization key of a payload (the signed transaction's hash, so
 * copies of one payment meet durably and across replicas), quota units (0
 * on networks whose settlements are never counted), reconciliation from the
 * ledger, and reachability.
 */
import type { x402Facilitator } from "@x402/core/facilitator";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { Reason } from "../../protocol/reasons.js";
import { findXrplNetwork, type XrplNetwork } from "./networks.js";
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
  ExactXrplScheme,
  causeOfResult,
  MAX_LEDGERS_AHEAD,
  reasonForResult,
  type XrplSchemeSettings,
} from "./exactScheme.js";
import {
  networkNotServed,
  nothingWasSent,
  probeNetworks,
  unknownPayloadField,
} from "../familySupport.js";
import { XrplRpc } from "./rpc.js";
import { LedgerOutcomes } from "./ledgerOutcomes.js";
import { ValidatedLedgers } from "./validatedLedgers.js";
import { XrplReason } from "./reasons.js";
import { decodePayment, paymentHash, requiredAsset, signedBlobOf } from "./signedPayment.js";

export interface XrplSetup {
  networks: readonly {
    id: string;
    rpcUrl: string;
    /**
     * rippled's WebSocket, for the `ledger` stream: undefined takes the RPC
     * URL's host and port (`http` → `ws`, `https` → `wss`), null polls only.
     */
    wsUrl?: string | null;
  }[];
}

/** The WebSocket a node serving JSON-RPC at `rpcUrl` most likely serves too (public nodes serve both on one port). */
function webSocketUrlOf(rpcUrl: string): string {
  const url = new URL(rpcUrl);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  return url.toString();
}

export type XrplSettings = Pick<XrplSchemeSettings, "maxFeeDrops" | "minLedgerCloseSeconds">;

interface XrplRuntime {
  network: XrplNetwork;
  rpc: XrplRpc;
  scheme: ExactXrplScheme;
  /** The validated ledger index: by rippled's `ledger` stream, or read at most every 250 ms. */
  ledgers: ValidatedLedgers;
  lastTransportFailure: number;
}

export class XrplChainAdapter implements ChainFamily {
  readonly family = "xrpl";
  readonly signersKey = "xrpl";
  // Issued currencies (RLUSD) are stated as decimal values, as XRPL clients write them.
  readonly decimalAmounts = true;
  private readonly runtimes = new Map<string, XrplRuntime>();
  private readonly schemes = new Map<string, readonly string[]>();

  constructor(setup: XrplSetup, settings: XrplSettings, ctx: FamilyContext) {
    for (const { id, rpcUrl, wsUrl } of setup.networks) {
      const network = findXrplNetwork(id);
      if (!network) throw new Error(`unknown XRP Ledger network ${id}`);
      // The callback runs later, once the runtime is in the map.
      const runtime = () => this.runtimes.get(id)!;
      const rpc = new XrplRpc({
        network: id,
        url: rpcUrl,
        onTransportFailure: (at) => (runtime().lastTransportFailure = at),
      });
      const ledgers = new ValidatedLedgers({
        network: id,
        wsUrl: wsUrl === null ? undefined : (wsUrl ?? webSocketUrlOf(rpcUrl)),
        readValidated: () =>
          rpc
            .call<{ ledger_index: number | string }>("ledger", { ledger_index: "validated" })
            .then((res) => Number(res.ledger_index)),
        pollMs: ctx.pollingIntervalMs ?? 500,
        log: ctx.log,
      });
      const scheme = new ExactXrplScheme(
        network,
        rpc,
        ledgers,
        new LedgerOutcomes(rpc),
        ctx.journal,
        {
          ...settings,
          settleTimeoutMs: ctx.settleTimeoutMs,
        },
      );
      this.runtimes.set(id, { network, rpc, scheme, ledgers, lastTransportFailure: 0 });
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
    await Promise.all([...this.runtimes.values()].map((r) => r.ledgers.start()));
  }

  async close(): Promise<void> {
    await Promise.all([...this.runtimes.values()].map((r) => r.ledgers.close()));
  }

  /** Who caused a settlement that failed on-chain: the ledger's result code for it. */
  async failureCause(
    payload: PaymentPayload,
    requirements: PaymentRequirements,
  ): Promise<FailureCause> {
    const runtime = this.runtimes.get(requirements.network);
    const hash = paymentHash(payload);
    if (!runtime || !hash) return "requirements";
    return runtime.scheme.failureCause(hash);
  }

  payerOf(payload: PaymentPayload): string | undefined {
    const account = decodePayment(payload)?.Account;
    return typeof account === "string" ? account : undefined;
  }

  authorizationKey(payload: PaymentPayload, requirements: PaymentRequirements): string | undefined {
    const hash = paymentHash(payload);
    return hash ? `${requirements.network}:tx:${hash}` : undefined;
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

  quotaUnits(_payload: PaymentPayload, requirements: PaymentRequirements): number {
    return this.runtimes.get(requirements.network)?.network.quotaExempt ? 0 : 1;
  }

  shapeError(payload: PaymentPayload): string | undefined {
    if (!signedBlobOf(payload)) {
      return "paymentPayload.payload.signedTxBlob must be the signed Payment in hex (at most 2,048 bytes)";
    }
    return unknownPayloadField(payload, ["signedTxBlob"]);
  }

  async prepare(
    _payload: PaymentPayload,
    requirements: PaymentRequirements,
  ): Promise<PreparedPayment> {
    const asset = requiredAsset(requirements);
    if (typeof asset === "string") {
      return { ok: false, reason: Reason.invalidPaymentRequirements, message: asset };
    }
    // An issued currency is its code and its issuer: the same code from
    // another issuer is another asset, settled only when listed.
    if (asset.kind === "issued") {
      const listed = this.runtimes
        .get(requirements.network)
        ?.network.assets.find((a) => a.kind === "issued" && a.currency === asset.currency);
      if (listed && listed.kind === "issued" && listed.issuer !== asset.issuer) {
        return {
          ok: false,
          reason: Reason.unsupportedAsset,
          message: `${listed.symbol} on ${requirements.network} is issued by ${listed.issuer}; paymentRequirements.extra.issuer names ${asset.issuer}`,
        };
      }
    }
    return { ok: true, requirements };
  }

  async currentBlock(network: string): Promise<bigint | undefined> {
    const r = this.runtimes.get(network);
    return r ? BigInt(await r.ledgers.current()) : undefined;
  }

  rpcFailedSince(network: string, sinceMs: number): boolean {
    return (this.runtimes.get(network)?.lastTransportFailure ?? 0) >= sinceMs;
  }

  probe(): Promise<NetworkProbe[]> {
    return probeNetworks(
      [...this.runtimes.values()].map((r) => ({
        network: r.network.id,
        host: r.rpc.host,
        read: () => r.rpc.call("server_info"),
      })),
    );
  }

  /** A success is answered from a validated ledger, which consensus never takes back. */
  readonly successIsFinal = true;

  /** No read confirms several successes at once; none is needed, its successes being final. */
  readonly stillLanded = null;

  /** Sends no reorged success again: its successes are validated, so no reorg takes one back. */
  readonly reland = null;

  /**
   * No value naming the chain is read: its networks' records are never
   * checked against a replaced chain.
   */
  readonly identity = null;

  /**
   * From the ledger alone: a validated transaction decides it; one missing
   * from every ledger up to its `LastLedgerSequence` never landed;
   * otherwise the same signed bytes are submitted again (harmless if they
   * are already in, or expired) and the settlement stays pending.
   */
  async reconcile(pending: PendingSettlement): Promise<ReconcileOutcome> {
    const r = this.runtimes.get(pending.network);
    if (!r) return networkNotServed(pending.network);
    const latest = pending.transactions[pending.transactions.length - 1];
    if (!latest) return nothingWasSent();
    const last = Number(latest.detail["lastLedgerSequence"]);
    const range = {
      first: Number(latest.detail["firstLedger"] ?? last - MAX_LEDGERS_AHEAD),
      last,
    };
    const status = await r.scheme.status(latest.reference, range);
    if (status.state === "validated") {
      return status.result === "tesSUCCESS"
        ? { status: "succeeded", transaction: latest.reference }
        : {
            status: "failed",
            reason: reasonForResult(status.result, XrplReason.transactionFailed),
            message: `the payment was validated with ${status.result}; no amount moved`,
            transaction: latest.reference,
            cause: causeOfResult(status.result),
          };
    }
    if (status.state === "missing") {
      return {
        status: "failed",
        reason: XrplReason.expired,
        message: `the payment was not validated by its LastLedgerSequence (${last}) and can no longer land; nothing was transferred`,
      };
    }
    const blob = latest.detail["blob"];
    if (status.state === "unknown" && typeof blob === "string") {
      await r.rpc.call("submit", { tx_blob: blob, fail_hard: true }).catch(() => undefined);
    }
    return { status: "pending", transaction: latest.reference };
  }
}

export function createXrpl(
  setup: XrplSetup,
  settings: XrplSettings,
  ctx: FamilyContext,
): XrplChainAdapter {
  return new XrplChainAdapter(setup, settings, ctx);
}
