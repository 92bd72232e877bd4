/**
 * The service behaviour behind /verify and /settle, without HTTP.
 *
 * A settle runs the stages of `stages/` in order: idempotency, catalog,
 * confidential receipt, intent, quota, commit, confidential gate, mechanism
 * (see `settleStages`). The intent stage is also where duplicates meet: its
 * insert is refused for an authorization that already has a live record,
 * and that record decides the answer (duplicates.ts). A verify asks the
 * engine and the payment's record together (the record's read also tells
 * whether the payer is cooling), and catalogs a valid payment.
 * Infrastructure failures become 503 `service_unavailable`, never a payment
 * reason.
 */
import { randomUUID } from "node:crypto";
import type { SettleResponse, VerifyResponse } from "@x402/core/types";
import { ChainUnavailableError, type RoutedPayment } from "../../chains/ports.js";
import { ServiceError, describeError } from "../../lib/errors.js";
import type { Logger } from "../../lib/logger.js";
import type { InspectedPayment, PaymentRequest } from "../../protocol/index.js";
import { verifyRefusal } from "../../protocol/answers.js";
import type { ApiKeyPrincipal } from "../keys/authenticator.js";
import type { LiveLookup } from "../settlements/settlementReads.js";
import type { SettlementRecorder } from "../settlements/settlementRecorder.js";
import type { Cataloger } from "../catalog/cataloger.js";
import type { QuotaLedger } from "../plans/quotaLedger.js";
import {
  readPaymentIdentifier,
  type PaymentIdentifierStore,
} from "../idempotency/paymentIdentifiers.js";
import type { PaymentEngine } from "./engine.js";
import { DuplicateSettles, verdictFromRecord } from "./duplicates.js";
import {
  runSettle,
  type ExtensionResponses,
  type SettleStages,
  type StageTimer,
} from "./stages/pipeline.js";
import { idempotencyStage } from "./stages/idempotencyStage.js";
import { catalogStage } from "./stages/catalogStage.js";
import { quotaStage } from "./stages/quotaStage.js";
import { intentStage } from "./stages/intentStage.js";
import { coolingRefusal } from "./stages/payerCooling.js";
import { payerLaneStage } from "./stages/payerLaneStage.js";
import type { PayerLanes } from "./payerLanes.js";
import { commitStage } from "./stages/commitStage.js";
import { mechanismStage } from "./stages/mechanismStage.js";
import { confidentialGateStage, confidentialReceiptStage } from "./stages/confidentialStages.js";
import type { ConfidentialGate } from "../confidential/confidentialGate.js";
import type { ReplicaGuard } from "../health/replicaGuard.js";

export type { ExtensionResponses };

export interface PaymentServiceDeps {
  engine: PaymentEngine;
  recorder: SettlementRecorder;
  log: Logger;
  /** How long a re-presented pending payment follows the chain before answering pending again. */
  settleTimeoutMs: number;
  /** A pending record older than this has lost its owner. */
  reconcileAfterMs: number;
  catalog?: Cataloger;
  /** Plans and quotas; absent = settlements are not metered. */
  quota?: QuotaLedger;
  paymentIds?: PaymentIdentifierStore;
  /** Confidential settlement's rules, credits and receipts. */
  confidential?: ConfidentialGate;
  /** Quota units a confidential settlement costs (its tier fee); default 1. */
  confidentialUnits?: number;
  /** Told each settle stage's own time (the service turns it into a metric). */
  timeStage?: StageTimer;
  /** How long a payer whose own payment failed on-chain is refused (0 or absent: never). */
  payerCoolingMs?: number;
  /** One settle in flight per payer and network (payerLanes.ts); absent: none. */
  payerLanes?: PayerLanes;
  /** Refuses payments while replicas run without the Redis they must share (replicaGuard.ts). */
  replicaGuard?: Pick<ReplicaGuard, "refusal">;
}

export class PaymentService {
  private readonly stages: SettleStages;

  constructor(private readonly deps: PaymentServiceDeps) {
    const duplicates = new DuplicateSettles(deps.engine, deps.recorder, deps.log, {
      waitMs: deps.settleTimeoutMs,
      ownerGoneAfterMs: deps.reconcileAfterMs,
    });
    this.stages = settleStages(deps, duplicates);
  }

  async verify(
    principal: ApiKeyPrincipal,
    request: PaymentRequest,
    extensionResponses: ExtensionResponses = {},
  ): Promise<VerifyResponse> {
    const { engine } = this.deps;
    const payment = engine.inspect(request);
    assertWellFormed(payment);
    this.assertServing();
    readPaymentIdentifier(request.paymentPayload); // 400 when malformed; verify never claims it
    const refusal = await this.deps.confidential?.refusal(principal.accountId, request);
    if (refusal) return verifyRefusal({ ...refusal, payer: payment.payer });
    // The record and the chain are asked together: a payment already
    // settled must not verify (the chain alone cannot always tell, e.g. a
    // Solana transaction already executed), and one settling for this
    // account is owed its delivery even once the chain has consumed it.
    // Both are awaited (nothing of a verification outlives its answer);
    // where the record decides, the chain's verdict, or its outage, is moot.
    // The same read tells whether the payer is cooling (its own payment
    // failed on-chain recently): a settle would refuse it before sending,
    // so the verify refuses it too, unless the record already decides.
    const at = Date.now();
    const [record, verdict] = await Promise.allSettled([
      this.recordOf(payment, at),
      unavailableAs503(() => engine.verify(payment)),
    ]);
    const found = record.status === "fulfilled" ? record.value : undefined;
    const fromRecord =
      verdictFromRecord(found?.row, payment, principal.accountId) ??
      (found?.payerFailedAt
        ? verifyRefusal(
            coolingRefusal(payment.payer, found.payerFailedAt, this.deps.payerCoolingMs ?? 0, at),
          )
        : undefined);
    if (!fromRecord && verdict.status === "rejected") throw verdict.reason;
    const result = fromRecord ?? (verdict as PromiseFulfilledResult<VerifyResponse>).value;
    const catalog = this.deps.catalog;
    if (catalog) {
      const { paymentPayload, paymentRequirements } = request;
      const outcome = result.isValid
        ? await catalog.record("verify", principal.accountId, paymentPayload, paymentRequirements)
        : catalog.declined("verify", paymentPayload);
      if (outcome) extensionResponses["bazaar"] = outcome;
    }
    return result;
  }

  /**
   * The live record of a payment, and whether its payer is cooling, for a
   * verify. A database that cannot be read leaves the chain's verdict to
   * stand (logged): a settle of the payment checks both again, and fails
   * closed.
   */
  private async recordOf(payment: InspectedPayment, at: number): Promise<LiveLookup | undefined> {
    const coolingMs = this.deps.payerCoolingMs ?? 0;
    try {
      return await this.deps.recorder.reads.lookUpLive(
        payment.authorizationKey,
        coolingMs > 0
          ? {
              network: payment.request.paymentRequirements.network,
              payer: payment.payer,
              since: new Date(at - coolingMs),
            }
          : undefined,
      );
    } catch (e) {
      this.deps.log.warn({ err: describeError(e) }, "verify could not read the payment's record");
      return undefined;
    }
  }

  async settle(
    principal: ApiKeyPrincipal,
    request: PaymentRequest,
    extensionResponses: ExtensionResponses = {},
    requestId: string = randomUUID(),
  ): Promise<SettleResponse> {
    const payment = this.deps.engine.inspect(request);
    assertWellFormed(payment);
    this.assertServing();
    return runSettle(
      this.stages,
      {
        ...{ principal, request, payment, requestId, extensionResponses },
        units: this.unitsOf(payment),
      },
      this.deps.timeStage,
    );
  }

  /** Nothing is verified or settled while the replicas cannot share their limits. */
  private assertServing(): void {
    const refusal = this.deps.replicaGuard?.refusal();
    if (refusal) throw new ServiceError("service_unavailable", refusal, { retryable: true });
  }

  private unitsOf(payment: RoutedPayment): number {
    const gate = this.deps.confidential;
    return gate && gate.concerns(payment.request) && payment.units > 0
      ? payment.units * (this.deps.confidentialUnits ?? 1)
      : payment.units;
  }
}

/** A malformed payment is the caller's 400, before any stage runs. */
function assertWellFormed(payment: InspectedPayment): void {
  if (payment.shapeError) throw new ServiceError("invalid_request", payment.shapeError);
}

/**
 * The settle stages in order; the intent stage opens the settlement the
 * stages after it receive, and the mechanism is last. (The catalog and the
 * confidential receipt act on the way back, after the commit.)
 */
function settleStages(deps: PaymentServiceDeps, duplicates: DuplicateSettles): SettleStages {
  return {
    before: [
      ...(deps.paymentIds ? [idempotencyStage(deps.paymentIds)] : []),
      ...(deps.catalog ? [catalogStage(deps.catalog)] : []),
      ...(deps.confidential ? [confidentialReceiptStage(deps.confidential)] : []),
      ...(deps.payerLanes ? [payerLaneStage(deps.payerLanes)] : []),
    ],
    intent: intentStage(
      deps.recorder,
      duplicates,
      deps.payerCoolingMs ?? 0,
      deps.quota !== undefined,
    ),
    after: [
      ...(deps.quota ? [quotaStage(deps.quota)] : []),
      commitStage(deps.engine),
      ...(deps.confidential ? [confidentialGateStage(deps.confidential)] : []),
      mechanismStage(deps.engine),
    ],
  };
}

async function unavailableAs503<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (e) {
    if (!(e instanceof ChainUnavailableError)) throw e;
    throw new ServiceError("service_unavailable", `${e.message}; retry shortly`, {
      retryable: true,
      cause: e,
    });
  }
}
