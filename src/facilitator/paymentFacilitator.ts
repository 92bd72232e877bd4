/**
 * The protocol engine: the official `x402Facilitator` with every chain
 * family registered on it, fronted by the checks that turn a request the
 * mechanisms cannot handle into a precise reason instead of an exception.
 *
 * Invariant: an infrastructure failure (the chain's RPC unreachable) is
 * never answered as the payer's fault. It surfaces as `ChainUnavailableError`
 * and the service answers 503.
 *
 * Nothing here touches storage or HTTP; settlement recording lives in
 * features/settlements.
 */
import { createHash } from "node:crypto";
import stringify from "safe-stable-stringify";
import type { x402Facilitator } from "@x402/core/facilitator";
import type { SettleResponse, VerifyResponse } from "@x402/core/types";
import { describeError } from "../lib/errors.js";
import { Reason, publicReason } from "../lib/reasons.js";
import type { Logger } from "../lib/logger.js";
import {
  ChainUnavailableError,
  type ChainFamily,
  type NetworkProbe,
  type PendingSettlement,
  type PreparedPayment,
  type ReconcileOutcome,
  type SettlementRun,
} from "../chains/ports.js";
import { runInSettlementScope } from "../chains/settlementScope.js";
import { X402_VERSION, type PaymentRequest, type SupportedResponse } from "../protocol.js";
import { sanitizeMessage } from "./sanitize.js";
import { PerBlockVerifyCache } from "./verifyCache.js";
import { VerifyThreadGoneError, type VerifyThreadPool } from "./verifyThreadPool.js";

export { X402_VERSION, type PaymentRequest, type SupportedResponse };

/** The payment engine as the service sees it (features declare their own view of it). */
export class PaymentFacilitator {
  private supportedCache: { at: number; value: SupportedResponse } | undefined;
  private readonly verifyCache = new PerBlockVerifyCache();
  private verifyThreads: VerifyThreadPool | undefined;

  constructor(
    readonly engine: x402Facilitator,
    private readonly families: readonly ChainFamily[],
    private readonly log: Logger,
  ) {}

  /**
   * Rebuilt at most once a second: cheap to serve under load, and fresh
   * enough that families offering accounts in rotation (Solana fee payers)
   * are not frozen to one choice.
   */
  supported(): SupportedResponse {
    if (!this.supportedCache || Date.now() - this.supportedCache.at > 1_000) {
      const raw = this.engine.getSupported();
      const signers: Record<string, string[]> = {};
      // Mechanisms report their CAIP family as a pattern (`<namespace>:*`);
      // each family says the key the service's specification lists it under.
      const keys = new Map(this.families.map((f) => [`${f.family}:*`, f.signersKey]));
      for (const [pattern, list] of Object.entries(raw.signers)) {
        const key = keys.get(pattern) ?? pattern;
        signers[key] = [...new Set([...(signers[key] ?? []), ...list])];
      }
      this.supportedCache = {
        at: Date.now(),
        value: {
          kinds: raw.kinds.filter((k) => k.x402Version === X402_VERSION),
          extensions: raw.extensions,
          signers,
        },
      };
    }
    return this.supportedCache.value;
  }

  /** Every CAIP-2 network served, across families. */
  networks(): string[] {
    return this.families.flatMap((f) => [...f.networks().keys()]);
  }

  private familyOf(network: string): ChainFamily | undefined {
    return this.families.find((f) => f.networks().has(network));
  }

  /** A message naming the first malformed field of the scheme payload, or undefined. */
  shapeError(req: PaymentRequest): string | undefined {
    const family = this.familyOf(req.paymentRequirements.network);
    if (!family) return undefined;
    if (!family.decimalAmounts && !/^\d+$/.test(req.paymentRequirements.amount)) {
      return "paymentRequirements.amount must be a string of digits: the amount in the token's smallest unit";
    }
    return family.shapeError(req.paymentPayload, req.paymentRequirements);
  }

  /** The payer the payload names (unverified), if its family can tell. */
  payerOf(req: PaymentRequest): string | undefined {
    return this.familyOf(req.paymentRequirements.network)?.payerOf(
      req.paymentPayload,
      req.paymentRequirements,
    );
  }

  /**
   * The key shared by every copy of this signed authorization. Falls back to
   * the network and a hash of the payload, which still catches byte-identical
   * duplicates on a network no family serves.
   */
  authorizationKey(req: PaymentRequest): string {
    const { network } = req.paymentRequirements;
    const own = this.familyOf(network)?.authorizationKey(
      req.paymentPayload,
      req.paymentRequirements,
    );
    if (own) return own;
    const digest = createHash("sha256")
      .update(stringify(req.paymentPayload.payload) ?? "")
      .digest("hex");
    return `${network}:payload:${digest}`;
  }

  /** The reason a replay of a consumed authorization gets (see ChainFamily.replayReason). */
  replayReason(req: PaymentRequest): string {
    const family = this.familyOf(req.paymentRequirements.network);
    return (
      family?.replayReason?.(req.paymentPayload, req.paymentRequirements) ??
      Reason.duplicateSettlement
    );
  }

  /** Quota units a success costs; 1 where no family says otherwise. */
  quotaUnits(req: PaymentRequest): number {
    const family = this.familyOf(req.paymentRequirements.network);
    return family ? family.quotaUnits(req.paymentPayload, req.paymentRequirements) : 1;
  }

  /** What the chain says became of a pending settlement. */
  reconcile(pending: PendingSettlement): Promise<ReconcileOutcome> {
    const family = this.familyOf(pending.network);
    if (!family) {
      return Promise.resolve({
        status: "failed",
        reason: Reason.invalidNetwork,
        message: `network ${pending.network} is no longer configured`,
      });
    }
    return family.reconcile(pending);
  }

  /** Verifications of the networks these threads serve run there (see verifyThreadPool.ts). */
  verifyOn(threads: VerifyThreadPool): void {
    this.verifyThreads = threads;
  }

  /** The verify threads, when verifications run on any (tests and benchmarks read them). */
  get threads(): VerifyThreadPool | undefined {
    return this.verifyThreads;
  }

  /** The families served, for start-up checks of their chains. */
  get servedFamilies(): readonly ChainFamily[] {
    return this.families;
  }

  /** Every network's reachability, by one cheap read each (readiness). */
  async probe(): Promise<NetworkProbe[]> {
    return (await Promise.all(this.families.map((f) => f.probe()))).flat();
  }

  async verify(req: PaymentRequest): Promise<VerifyResponse> {
    const onThread = this.verifyThreads?.verify(req);
    if (onThread) {
      try {
        return await onThread;
      } catch (e) {
        // Only reads were lost with the thread: verify here instead.
        if (!(e instanceof VerifyThreadGoneError)) throw e;
      }
    }
    return this.verifyHere(req);
  }

  private async verifyHere(req: PaymentRequest): Promise<VerifyResponse> {
    const startedAt = Date.now();
    const network = req.paymentRequirements.network;
    const payer = this.payerOf(req);
    const pre = await this.precheck(req);
    if (!pre.ok)
      return {
        isValid: false,
        invalidReason: pre.reason,
        invalidMessage: pre.message,
        ...(payer ? { payer } : {}),
      };
    const family = this.familyOf(network);
    const block = await this.ask(network, () => family?.currentBlock(network));
    // A refusal reached while the RPC was failing says nothing about the
    // payment (a failed code or balance read reads as a bad signature): it
    // throws, so the block's cache forgets it and the next ask checks afresh.
    const run = async () => {
      const ranAt = Date.now();
      const verdict = await this.engine.verify(req.paymentPayload, pre.requirements);
      if (!verdict.isValid) this.assertChainAnswered(network, ranAt);
      return verdict;
    };
    const result =
      block === undefined
        ? await run()
        : await this.verifyCache.get(
            block,
            PerBlockVerifyCache.keyOf(req.paymentPayload, pre.requirements),
            run,
          );
    if (result.isValid) return result;
    this.assertChainAnswered(network, startedAt);
    const message = sanitizeMessage(result.invalidMessage);
    return {
      ...result,
      invalidReason: publicReason(result.invalidReason ?? Reason.unexpectedVerifyError),
      ...(message ? { invalidMessage: message } : {}),
      ...(result.payer || payer ? { payer: result.payer ?? payer } : {}),
    };
  }

  /**
   * Settles a payment. `settlementId` ties the transactions sent on its
   * behalf to the settlement record (see the transaction journal). Throws
   * `ChainUnavailableError` when the chain could not be asked and nothing
   * was sent.
   */
  async settle(req: PaymentRequest, settlementId?: string): Promise<SettleResponse> {
    const startedAt = Date.now();
    // The requirements are what the resource server asked for: the answer
    // names their network, never one a payload merely claims.
    const network = req.paymentRequirements.network;
    const payer = this.payerOf(req);
    const pre = await this.precheck(req);
    if (!pre.ok) {
      return {
        success: false,
        errorReason: pre.reason,
        errorMessage: pre.message,
        transaction: "",
        network,
        ...(payer ? { payer } : {}),
      } as SettleResponse;
    }
    const family = this.familyOf(network)!;
    const settle = () => this.engine.settle(req.paymentPayload, pre.requirements);
    const run = await runInSettlementScope(settlementId ?? "", () =>
      family.runSettlement ? family.runSettlement(settle) : runPlain(settle),
    );
    const { notes } = run;
    if (!run.ok) {
      const e = run.error;
      if (e instanceof ChainUnavailableError && !notes.sent) throw e;
      // The mechanisms turn chain failures into results; reaching here means
      // something unexpected, and nothing is known to have been broadcast.
      this.log.error({ err: describeError(e), network }, "settle threw");
      if (notes.ambiguousReference) {
        return this.pendingAnswer(notes.ambiguousReference, network, payer);
      }
      return {
        success: false,
        errorReason: Reason.unexpectedSettleError,
        errorMessage: "settlement could not be completed; nothing was charged",
        transaction: "",
        network,
        ...(payer ? { payer } : {}),
      } as SettleResponse;
    }
    let result = run.value;
    // A fee bump may have replaced the transaction the mechanism sent: report
    // the one that was actually mined.
    if (notes.minedReference && result.transaction) {
      result = { ...result, transaction: notes.minedReference };
    }
    if (result.success) return { ...result, network };
    // Never report a payment that may still land as failed: the row stays
    // pending and the reconciler (or a retry) decides it from the chain.
    if (notes.ambiguousReference) {
      return this.pendingAnswer(notes.ambiguousReference, network, payer);
    }
    // A refusal reached while the chain could not be read is not the payer's:
    // if nothing was sent, nothing is lost by saying so and retrying.
    // (A transaction in the answer was sent: its outcome stands.)
    if (!notes.sent && !notes.refusal && !result.transaction) {
      this.assertChainAnswered(network, startedAt);
    }
    const message = sanitizeMessage(notes.refusal?.message ?? result.errorMessage);
    return {
      ...result,
      errorReason:
        notes.refusal?.reason ?? publicReason(result.errorReason ?? Reason.unexpectedSettleError),
      errorMessage: message,
      transaction: result.errorReason === Reason.settlementPending ? result.transaction : "",
      network,
      ...(result.payer || payer ? { payer: result.payer ?? payer } : {}),
    } as SettleResponse;
  }

  private pendingAnswer(hash: string, network: string, payer: string | undefined): SettleResponse {
    return {
      success: false,
      errorReason: Reason.settlementPending,
      errorMessage: "the transaction was sent but the node's answer was lost; it is being followed",
      transaction: hash,
      network,
      ...(payer ? { payer } : {}),
    } as SettleResponse;
  }

  /** Runs a chain read; a failure to reach the chain becomes `ChainUnavailableError`. */
  private async ask<T>(
    network: string,
    read: () => Promise<T> | undefined,
  ): Promise<T | undefined> {
    try {
      return await read();
    } catch (e) {
      throw new ChainUnavailableError(
        network,
        `the ${network} RPC could not be reached; nothing was decided about this payment`,
        { cause: e },
      );
    }
  }

  private assertChainAnswered(network: string, sinceMs: number): void {
    if (this.familyOf(network)?.rpcFailedSince?.(network, sinceMs)) {
      throw new ChainUnavailableError(
        network,
        `the ${network} RPC failed while this payment was checked; nothing was decided about it`,
      );
    }
  }

  /** Version, network and scheme support, then the chain family's own checks. */
  private async precheck(req: PaymentRequest): Promise<PreparedPayment> {
    if (req.x402Version !== X402_VERSION || req.paymentPayload.x402Version !== X402_VERSION) {
      return {
        ok: false,
        reason: Reason.invalidX402Version,
        message: `x402Version must be ${X402_VERSION} in the request and in paymentPayload`,
      };
    }
    const { network, scheme } = req.paymentRequirements;
    const family = this.familyOf(network);
    if (!family) {
      return {
        ok: false,
        reason: Reason.invalidNetwork,
        message: `network ${network} is not supported here; see GET /supported`,
      };
    }
    if (!family.networks().get(network)?.includes(scheme)) {
      return {
        ok: false,
        reason: Reason.unsupportedScheme,
        message: `scheme ${scheme} is not supported on ${network}; see GET /supported`,
      };
    }
    return this.ask(network, () =>
      family.prepare(req.paymentPayload, req.paymentRequirements),
    ).then((p) => p!);
  }

  async close(): Promise<void> {
    await this.verifyThreads?.close();
    await Promise.all(this.families.map((f) => f.close()));
  }
}

/** A mechanism call for a family with no transaction notes of its own. */
async function runPlain<T>(settle: () => Promise<T>): Promise<SettlementRun<T>> {
  try {
    return { ok: true, value: await settle(), notes: { sent: false } };
  } catch (error) {
    return { ok: false, error, notes: { sent: false } };
  }
}
