/**
 * A settle as an ordered list of named stages (DESIGN "A settle, step by
 * step"). Each stage receives the shared context and `next`, the rest of the
 * list; it may answer without calling `next` (a replay, a duplicate), act
 * before it (reserve, record intent) and after it (commit, release). A new
 * concern is one more entry in the list.
 */
import type { SettleResponse } from "@x402/core/types";
import type { PaymentRequest } from "../../../protocol.js";
import type { ApiKeyPrincipal } from "../../keys/authenticator.js";
import type { QuotaReservation } from "../../plans/quotaLedger.js";

/** Extension outcomes for the EXTENSION-RESPONSES header, keyed by extension. */
export type ExtensionResponses = Record<string, unknown>;

export interface SettleContext {
  readonly principal: ApiKeyPrincipal;
  readonly request: PaymentRequest;
  readonly extensionResponses: ExtensionResponses;
  readonly authorizationKey: string;
  readonly payer: string | undefined;
  readonly units: number;
  /** Set by the quota stage when units were reserved. */
  reservation?: QuotaReservation;
  /** Set by the intent stage once the row is written. */
  settlementId?: string;
  startedAt: number;
}

export interface SettleStage {
  readonly name: string;
  run(ctx: SettleContext, next: () => Promise<SettleResponse>): Promise<SettleResponse>;
}

export function runStages(
  stages: readonly SettleStage[],
  ctx: SettleContext,
  last: () => Promise<SettleResponse>,
): Promise<SettleResponse> {
  const at = (i: number): Promise<SettleResponse> =>
    i === stages.length ? last() : stages[i]!.run(ctx, () => at(i + 1));
  return at(0);
}
