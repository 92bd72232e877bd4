/**
 * The protocol engine: the official `x402Facilitator` with every chain
 * family registered on it, fronted by the checks that turn a request the
 * mechanisms cannot handle into a precise reason instead of an exception.
 *
 * Nothing here touches storage or HTTP; settlement recording lives in
 * features/settlements.
 */
import { x402Facilitator } from "@x402/core/facilitator";
import type {
  PaymentPayload,
  PaymentRequirements,
  SettleResponse,
  VerifyResponse,
} from "@x402/core/types";
import { ServiceError, describeError } from "../lib/errors.js";
import { Reason, publicReason } from "../lib/reasons.js";
import type { Logger } from "../lib/logger.js";
import type { ChainAdapter } from "../chains/types.js";
import { runInSettlement, type SettlementScope } from "../chains/evm/settlementContext.js";
import { sanitizeMessage } from "./sanitize.js";
import { PerBlockVerifyCache } from "./verifyCache.js";

export const X402_VERSION = 2;

export interface PaymentRequest {
  x402Version: number;
  paymentPayload: PaymentPayload;
  paymentRequirements: PaymentRequirements;
}

export interface SupportedResponse {
  kinds: {
    x402Version: number;
    scheme: string;
    network: string;
    extra?: Record<string, unknown>;
  }[];
  extensions: string[];
  signers: Record<string, string[]>;
}

type Precheck =
  { ok: true; requirements: PaymentRequirements } | { ok: false; reason: string; message: string };

/** The payer named in a payload, when the payload shape names one. */
export function payerOf(payload: PaymentPayload): string | undefined {
  const inner = payload.payload as Record<string, unknown> | undefined;
  const auth = inner?.["authorization"] as Record<string, unknown> | undefined;
  if (auth && typeof auth["from"] === "string") return auth["from"];
  const permit2 = inner?.["permit2Authorization"] as Record<string, unknown> | undefined;
  if (permit2 && typeof permit2["from"] === "string") return permit2["from"];
  return undefined;
}

export class PaymentFacilitator {
  private supportedCache: SupportedResponse | undefined;
  private readonly verifyCache = new PerBlockVerifyCache();

  constructor(
    readonly engine: x402Facilitator,
    private readonly adapters: readonly ChainAdapter[],
    private readonly log: Logger,
  ) {}

  supported(): SupportedResponse {
    if (!this.supportedCache) {
      const raw = this.engine.getSupported();
      const signers: Record<string, string[]> = {};
      // Mechanisms report their CAIP family as a pattern (`eip155:*`); the
      // service advertises plain namespaces (`eip155`), as its spec shows.
      for (const [family, list] of Object.entries(raw.signers)) {
        const key = family.endsWith(":*") ? family.slice(0, -2) : family;
        signers[key] = [...new Set([...(signers[key] ?? []), ...list])];
      }
      this.supportedCache = {
        kinds: raw.kinds.filter((k) => k.x402Version === X402_VERSION),
        extensions: raw.extensions,
        signers,
      };
    }
    return this.supportedCache;
  }

  /**
   * Rejects a scheme payload whose shape is wrong (a 400, not a payment
   * verdict). Unknown networks and schemes pass: they get a verdict instead.
   */
  assertWellFormed(req: PaymentRequest): void {
    const adapter = this.adapters.find((a) => a.networks().has(req.paymentRequirements.network));
    const problem = adapter?.shapeError(req.paymentPayload, req.paymentRequirements);
    if (problem) throw new ServiceError("invalid_request", problem);
  }

  async verify(req: PaymentRequest): Promise<VerifyResponse> {
    const payer = payerOf(req.paymentPayload);
    const pre = await this.precheck(req);
    if (!pre.ok)
      return {
        isValid: false,
        invalidReason: pre.reason,
        invalidMessage: pre.message,
        ...(payer ? { payer } : {}),
      };
    const adapter = this.adapters.find((a) => a.networks().has(req.paymentRequirements.network));
    const block = await adapter?.currentBlock(req.paymentRequirements.network);
    const run = () => this.engine.verify(req.paymentPayload, pre.requirements);
    const result =
      block === undefined
        ? await run()
        : await this.verifyCache.get(
            block,
            PerBlockVerifyCache.keyOf(req.paymentPayload, pre.requirements),
            run,
          );
    if (result.isValid) return result;
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
   * behalf to the settlement record (see the transaction journal).
   */
  async settle(req: PaymentRequest, settlementId?: string): Promise<SettleResponse> {
    const network = req.paymentRequirements.network;
    const payer = payerOf(req.paymentPayload);
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
    let result: SettleResponse;
    const scope: SettlementScope = { settlementId: settlementId ?? "" };
    try {
      result = await runInSettlement(scope, () =>
        this.engine.settle(req.paymentPayload, pre.requirements),
      );
    } catch (e) {
      // The mechanisms turn chain failures into results; reaching here means
      // something unexpected, and nothing is known to have been broadcast.
      this.log.error({ err: describeError(e), network }, "settle threw");
      return {
        success: false,
        errorReason: Reason.unexpectedSettleError,
        errorMessage: "settlement could not be completed; nothing was charged",
        transaction: "",
        network,
        ...(payer ? { payer } : {}),
      } as SettleResponse;
    }
    // A fee bump may have replaced the transaction the mechanism sent: report
    // the one that was actually mined.
    if (scope.minedHash && result.transaction) result = { ...result, transaction: scope.minedHash };
    if (result.success) return result;
    if (scope.ambiguousHash) {
      // Never report a payment that may still land as failed: the row stays
      // pending and the reconciler decides it from the chain.
      return {
        success: false,
        errorReason: Reason.settlementPending,
        errorMessage:
          "the transaction was sent but the node's answer was lost; it is being followed",
        transaction: scope.ambiguousHash,
        network,
        ...(payer ? { payer } : {}),
      } as SettleResponse;
    }
    const message = sanitizeMessage(scope.refusal?.message ?? result.errorMessage);
    return {
      ...result,
      errorReason:
        scope.refusal?.reason ?? publicReason(result.errorReason ?? Reason.unexpectedSettleError),
      errorMessage: message,
      transaction: result.errorReason === Reason.settlementPending ? result.transaction : "",
      network: result.network || network,
      ...(result.payer || payer ? { payer: result.payer ?? payer } : {}),
    } as SettleResponse;
  }

  /** Version, network and scheme support, then the chain family's own checks. */
  private async precheck(req: PaymentRequest): Promise<Precheck> {
    if (req.x402Version !== X402_VERSION || req.paymentPayload.x402Version !== X402_VERSION) {
      return {
        ok: false,
        reason: Reason.invalidX402Version,
        message: `x402Version must be ${X402_VERSION} in the request and in paymentPayload`,
      };
    }
    const { network, scheme } = req.paymentRequirements;
    const adapter = this.adapters.find((a) => a.networks().has(network));
    if (!adapter) {
      return {
        ok: false,
        reason: Reason.invalidNetwork,
        message: `network ${network} is not supported here; see GET /supported`,
      };
    }
    if (!adapter.networks().get(network)?.includes(scheme)) {
      return {
        ok: false,
        reason: Reason.unsupportedScheme,
        message: `scheme ${scheme} is not supported on ${network}; see GET /supported`,
      };
    }
    return adapter.prepare(req.paymentPayload, req.paymentRequirements);
  }

  async close(): Promise<void> {
    await Promise.all(this.adapters.map((a) => a.close()));
  }
}

export function createEngine(): x402Facilitator {
  return new x402Facilitator();
}
