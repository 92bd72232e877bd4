/**
 * A settle as an ordered list of named stages (docs/architecture.md, "The
 * settle path, stage by stage"). Each stage receives the shared context and
 * `next`, the rest of the list; it may answer without calling `next` (a
 * replay, a duplicate), act before it (reserve, record intent) and after it
 * (commit, release). A new concern is one more entry in the list.
 */
import type { SettleResponse } from "@x402/core/types";
import type { InspectedPayment, PaymentRequest } from "../../../protocol/index.js";
import type { ApiKeyPrincipal } from "../../keys/authenticator.js";

/** Extension outcomes for the EXTENSION-RESPONSES header, keyed by extension. */
export type ExtensionResponses = Record<string, unknown>;

export interface SettleContext {
  readonly principal: ApiKeyPrincipal;
  readonly request: PaymentRequest;
  /** The request as read once at the edge: payer, authorization key, units, replay reason. */
  readonly payment: InspectedPayment;
  /** The HTTP request's id: recorded as the one answered success, when it is. */
  readonly requestId: string;
  readonly extensionResponses: ExtensionResponses;
  /** Quota units a success costs (the payment's, times a confidential tier fee). */
  readonly units: number;
  /** Set by the intent stage once the row is written. */
  settlementId?: string;
  startedAt: number;
}

export interface SettleStage {
  readonly name: string;
  run(ctx: SettleContext, next: () => Promise<SettleResponse>): Promise<SettleResponse>;
}

/**
 * Told each stage's own time, in seconds, when the stage returns or throws.
 * What it throws is ignored.
 */
export type StageTimer = (stage: string, seconds: number) => void;

/**
 * Runs the stages in order. With a timer, each stage's own time is reported:
 * its time from start to end less the time spent in the stages after it, so
 * the figures of one settle add up to its whole time and say which step held
 * it (a database flush, the chain) rather than counting the chain's wait in
 * every stage that wraps it.
 */
export function runStages(
  stages: readonly SettleStage[],
  ctx: SettleContext,
  last: () => Promise<SettleResponse>,
  timeStage?: StageTimer,
  clock: () => number = () => performance.now(),
): Promise<SettleResponse> {
  const at = (i: number): Promise<SettleResponse> => {
    if (i === stages.length) return last();
    const stage = stages[i]!;
    if (!timeStage) return stage.run(ctx, () => at(i + 1));
    const started = clock();
    let inLater = 0;
    const next = async (): Promise<SettleResponse> => {
      const entered = clock();
      try {
        return await at(i + 1);
      } finally {
        inLater += clock() - entered;
      }
    };
    const own = () => {
      // Timing only observes: a timer that fails must not change an answer
      // (a settle whose transfer landed is never turned into an error).
      try {
        timeStage(stage.name, (clock() - started - inLater) / 1000);
      } catch {
        /* the figure is lost, the settle is not */
      }
    };
    let running: Promise<SettleResponse>;
    try {
      running = stage.run(ctx, next);
    } catch (e) {
      running = Promise.reject(e);
    }
    return running.finally(own);
  };
  return at(0);
}
