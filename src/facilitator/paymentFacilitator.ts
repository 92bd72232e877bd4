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
import { Reason } from "../protocol/reasons.js";
import { settleRefusal, verifyRefusal } from "../protocol/answers.js";
import { protocolRefusal } from "../protocol/precheck.js";
import type { Logger } from "../lib/logger.js";
import {
  ChainUnavailableError,
  type ChainFamily,
  type FailureCause,
  type NetworkProbe,
  type PendingSettlement,
  type PreparedPayment,
  type ReconcileOutcome,
  type RoutedPayment,
} from "../chains/ports.js";
import { runInSettlementScope, type SettlingPayment } from "../chains/settlementScope.js";
import { X402_VERSION, type PaymentRequest, type SupportedResponse } from "../protocol/index.js";
import { sanitizeMessage, splitReason } from "./sanitize.js";
import { assertChainAnswered, publicReason } from "./familyAnswers.js";
import { answerResult, answerThrown } from "./settleReport.js";
import { PerBlockVerifyCache } from "./verifyCache.js";
import { VerifyThreadGoneError, type VerifyThreadPool } from "./verifyThreadPool.js";
import type { AcceptedAssets } from "./acceptedAssets.js";

export type { PaymentRequest, SupportedResponse };

/** The payment engine as the service sees it (features declare their own view of it). */
export class PaymentFacilitator {
  private supportedCache: { at: number; value: SupportedResponse } | undefined;
  private readonly verifyCache = new PerBlockVerifyCache();
  private verifyThreads: VerifyThreadPool | undefined;

  constructor(
    readonly engine: x402Facilitator,
    private readonly families: readonly ChainFamily[],
    private readonly log: Logger,
    /**
     * The assets settled on each network (absent: any the mechanisms take).
     * A payment in any other asset is refused before any chain call: an
     * arbitrary contract never runs inside our signers' transactions.
     */
    private readonly assets?: AcceptedAssets,
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
          ...(this.assets ? { assets: this.assets.listed(this.networks()) } : {}),
        },
      };
    }
    return this.supportedCache.value;
  }

  /** Every CAIP-2 network served, across families. */
  networks(): string[] {
    return this.families.flatMap((f) => [...f.networks().keys()]);
  }

  /** The served networks whose successes a reorg can take back: the reorg watch's. */
  reorgableNetworks(): string[] {
    return this.families.filter((f) => !f.successIsFinal).flatMap((f) => [...f.networks().keys()]);
  }

  /** Of these transactions, those still landed and succeeded (see `ChainFamily.stillLanded`). */
  stillLanded(network: string, references: readonly string[]): Promise<ReadonlySet<string>> {
    const family = this.familyOf(network);
    // No such read (or no family): nothing is confirmed together, so the
    // watch asks each success through reconcile.
    return family?.stillLanded
      ? family.stillLanded(network, references)
      : Promise.resolve(new Set<string>());
  }

  private familyOf(network: string): ChainFamily | undefined {
    return this.families.find((f) => f.networks().has(network));
  }

  /**
   * Reads a request once, at the edge: the family that serves its network
   * (the one lookup of a request), the payer its payload names, the key
   * shared by every copy of its signed authorization, the quota units a
   * success costs, the first malformed field, and the reason a replay gets.
   * The service's stages carry the result; verify and settle take it back.
   */
  inspect(request: PaymentRequest): RoutedPayment {
    const { paymentPayload: payload, paymentRequirements: requirements } = request;
    const family = this.familyOf(requirements.network);
    // Read when first asked: a valid verification never needs it (the scheme
    // names the payer), and on Solana it means decoding the whole message.
    let payer: { value: string | undefined } | undefined;
    return {
      request,
      family,
      get payer() {
        payer ??= { value: family?.payerOf(payload, requirements) };
        return payer.value;
      },
      // Without a family: the network and a hash of the payload, which still
      // catches byte-identical duplicates on a network nobody serves.
      authorizationKey:
        family?.authorizationKey(payload, requirements) ??
        `${requirements.network}:payload:${createHash("sha256")
          .update(stringify(payload.payload) ?? "")
          .digest("hex")}`,
      units: family ? family.quotaUnits(payload, requirements) : 1,
      shapeError: family ? shapeErrorOf(family, request) : undefined,
      replayReason: family?.replayReason(payload, requirements) ?? Reason.duplicateSettlement,
      repeatable: family?.repeatable(payload, requirements) ?? false,
      pendingKey: family?.pendingKey?.(payload),
    };
  }

  /**
   * What the chain says became of a pending settlement. A transaction that
   * failed on-chain names who caused it, as the settle's own answer does:
   * by the chain's word on the transaction where the family reads one,
   * otherwise by the family's `failureCause` (the payer's state now). So a
   * payer's failure decided here is kept off the merchant's failure limit.
   */
  async reconcile(pending: PendingSettlement): Promise<ReconcileOutcome> {
    const family = this.familyOf(pending.network);
    if (!family) {
      return {
        status: "failed",
        reason: Reason.invalidNetwork,
        message: `network ${pending.network} is no longer configured`,
      };
    }
    const outcome = await family.reconcile(pending);
    if (outcome.status !== "failed" || !outcome.transaction || outcome.cause) return outcome;
    const { paymentPayload, paymentRequirements } = pending.request;
    const cause = await family
      .failureCause(paymentPayload, paymentRequirements, outcome.transaction)
      .catch(() => undefined);
    return cause ? { ...outcome, cause } : outcome;
  }

  /**
   * A reorged success whose journaled transaction can no longer be mined,
   * sent again when its authorization can still land (see
   * `ChainFamily.reland`); undefined when its family cannot.
   */
  reland(pending: PendingSettlement & { id: string }): Promise<ReconcileOutcome> | undefined {
    const family = this.familyOf(pending.network);
    return family?.reland ? family.reland(pending) : undefined;
  }

  /**
   * Who caused a settlement of this payment that failed on-chain. A family
   * that cannot tell, or a read that fails, charges the requirements: the
   * account's own limit then counts it, as it did before payers were told apart.
   */
  async failureCause(payment: RoutedPayment, transaction: string): Promise<FailureCause> {
    const { paymentPayload, paymentRequirements } = payment.request;
    const family = payment.family;
    if (!family) return "requirements";
    return family
      .failureCause(paymentPayload, paymentRequirements, transaction)
      .catch(() => "requirements");
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

  /** A verification of a request not inspected yet (a verify thread's). */
  verifyRequest(request: PaymentRequest): Promise<VerifyResponse> {
    return this.verify(this.inspect(request));
  }

  async verify(payment: RoutedPayment): Promise<VerifyResponse> {
    const onThread = this.verifyThreads?.verify(payment.request);
    if (onThread) {
      try {
        return await onThread;
      } catch (e) {
        // Only reads were lost with the thread: verify here instead.
        if (!(e instanceof VerifyThreadGoneError)) throw e;
      }
    }
    return this.verifyHere(payment);
  }

  private async verifyHere(payment: RoutedPayment): Promise<VerifyResponse> {
    const startedAt = Date.now();
    const { request: req, family } = payment;
    const network = req.paymentRequirements.network;
    const pre = await this.precheck(payment);
    if (!pre.ok) return verifyRefusal({ ...pre, payer: payment.payer });
    const block = await this.ask(network, () => family?.currentBlock(network));
    // A refusal reached while the RPC was failing says nothing about the
    // payment (a failed code or balance read reads as a bad signature): it
    // throws, so the block's cache forgets it and the next ask checks afresh.
    const run = async () => {
      const ranAt = Date.now();
      const verdict = await this.engineVerify(payment, pre.requirements, ranAt);
      if (!verdict.isValid) assertChainAnswered(family, network, ranAt);
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
    assertChainAnswered(family, network, startedAt);
    const reason = splitReason(result.invalidReason ?? Reason.unexpectedVerifyError);
    const message = sanitizeMessage(result.invalidMessage ?? reason.detail);
    return {
      ...result,
      invalidReason: publicReason(family, reason.code),
      ...(message ? { invalidMessage: message } : {}),
      ...(result.payer || payment.payer ? { payer: result.payer ?? payment.payer } : {}),
    };
  }

  /**
   * The mechanism's verdict. A mechanism or extension that throws instead of
   * answering is not an answer the caller can act on as an HTTP error: with
   * the chain failing meanwhile it is an outage (503, retry); otherwise the
   * payment is refused with `unexpected_verify_error` and the error logged.
   */
  private async engineVerify(
    payment: RoutedPayment,
    requirements: PaymentRequest["paymentRequirements"],
    ranAt: number,
  ): Promise<VerifyResponse> {
    const { request: req, family } = payment;
    const network = req.paymentRequirements.network;
    try {
      return await this.engine.verify(req.paymentPayload, requirements);
    } catch (e) {
      if (e instanceof ChainUnavailableError) throw e;
      assertChainAnswered(family, network, ranAt);
      this.log.error({ err: describeError(e), network }, "verify threw");
      return verifyRefusal({
        reason: Reason.unexpectedVerifyError,
        message: "the payment could not be checked as sent; nothing was charged",
        payer: payment.payer,
      });
    }
  }

  /**
   * Settles the payment of a settlement, in its scope: the transactions sent
   * on its behalf are journaled against it and note there what they did
   * (see chains/settlementScope.ts), and the answer is read from the
   * mechanism's result and those notes (settleReport.ts). Throws
   * `ChainUnavailableError` when the chain could not be asked and nothing
   * was sent, `NothingSentError` when a store it needed failed first.
   */
  async settle(settlement: SettlingPayment): Promise<SettleResponse> {
    const startedAt = Date.now();
    const { request: req, family, payer } = settlement.payment;
    // The requirements are what the resource server asked for: the answer
    // names their network, never one a payload merely claims.
    const network = req.paymentRequirements.network;
    const pre = await this.precheck(settlement.payment);
    if (!pre.ok) return settleRefusal({ ...pre, payer }, network);
    const context = { network, payer, family, startedAt, log: this.log };
    const { notes } = settlement;
    let result: SettleResponse;
    try {
      result = await runInSettlementScope(settlement, () =>
        this.engine.settle(req.paymentPayload, pre.requirements),
      );
    } catch (error) {
      return answerThrown({ error, notes }, context);
    }
    return answerResult({ result, notes }, context);
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

  /** The protocol's checks (version, network, scheme), then the family's own. */
  private async precheck(payment: RoutedPayment): Promise<PreparedPayment> {
    const { request: req, family } = payment;
    const { network, asset } = req.paymentRequirements;
    const refused =
      protocolRefusal(req, family?.networks().get(network)) ?? this.assets?.refusal(network, asset);
    if (refused) return { ok: false, ...refused };
    return this.ask(network, () =>
      family!.prepare(req.paymentPayload, req.paymentRequirements),
    ).then((p) => p!);
  }

  async close(): Promise<void> {
    await this.verifyThreads?.close();
    await Promise.all(this.families.map((f) => f.close()));
  }
}

/** The first malformed field, the amount's syntax first (decimal only where the family takes it). */
function shapeErrorOf(family: ChainFamily, req: PaymentRequest): string | undefined {
  if (!family.decimalAmounts && !/^\d+$/.test(req.paymentRequirements.amount)) {
    return "paymentRequirements.amount must be a string of digits: the amount in the token's smallest unit";
  }
  return family.shapeError(req.paymentPayload, req.paymentRequirements);
}
