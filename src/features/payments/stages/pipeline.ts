/**
 * A settle as an ordered list of named stages (docs/architecture.md, "The
 * settle path, stage by stage"). Each stage receives the context and
 * `next`, the rest of the list; it may answer without calling `next` (a
 * replay, a duplicate), act before it (reserve, record intent) and after it
 * (commit, release). A new concern is one more entry in the list.
 *
 * The intent stage divides the list: it opens the settlement (its row, see
 * features/settlements/settlement.ts) and hands it to the rest, whose
 * context carries it. A stage before it has no settlement to touch; a
 * stage after it always has one.
 */
import type { SettleResponse } from "@x402/core/types";
import type { RoutedPayment } from "../../../chains/ports.js";
import type { PaymentRequest } from "../../../protocol/index.js";
import type { ApiKeyPrincipal } from "../../keys/authenticator.js";
import type { Settlement } from "../../settlements/settlement.js";

/** Extension outcomes for the EXTENSION-RESPONSES header, keyed by extension. */
export type ExtensionResponses = Record<string, unknown>;

export interface SettleContext {
  readonly principal: ApiKeyPrincipal;
  readonly request: PaymentRequest;
  /** The request as read once at the edge: payer, authorization key, units, family. */
  readonly payment: RoutedPayment;
  /** The HTTP request's id: recorded as the one answered success, when it is. */
  readonly requestId: string;
  readonly extensionResponses: ExtensionResponses;
  /** Quota units a success costs (the payment's, times a confidential tier fee). */
  readonly units: number;
}

/** The context of the stages after the intent stage: with the settlement it opened. */
interface SettlingContext extends SettleContext {
  readonly settlement: Settlement;
}

type Answer = Promise<SettleResponse>;

export interface SettleStage<C = SettleContext> {
  readonly name: string;
  run(ctx: C, next: () => Answer): Answer;
}

/** A stage after the intent stage. */
export type SettlementStage = SettleStage<SettlingContext>;

/** The intent stage: opens the settlement the rest receive. */
export interface OpeningStage {
  readonly name: string;
  run(ctx: SettleContext, next: (settlement: Settlement) => Answer): Answer;
}

/** A settle's stages: those before the settlement exists, the one opening it, those after. */
export interface SettleStages {
  readonly before: readonly SettleStage[];
  readonly intent: OpeningStage;
  readonly after: readonly SettlementStage[];
}

/**
 * Told each stage's own time, in seconds, when the stage returns or throws.
 * What it throws is ignored.
 */
export type StageTimer = (stage: string, seconds: number) => void;

/** Runs a settle's stages in order (see runStages for the timer). */
export function runSettle(
  stages: SettleStages,
  ctx: SettleContext,
  timeStage?: StageTimer,
  clock: () => number = () => performance.now(),
): Answer {
  const { before, intent, after } = stages;
  const unanswered = () => Promise.reject(new Error("the settle stages ended without an answer"));
  const settling = (settlement: Settlement) =>
    runStages(after, { ...ctx, settlement }, unanswered, timeStage, clock);
  return runStages(
    before,
    ctx,
    () => timed(intent.name, (next) => intent.run(ctx, next), settling, timeStage, clock),
    timeStage,
    clock,
  );
}

/**
 * Runs the stages in order. With a timer, each stage's own time is reported:
 * its time from start to end less the time spent in the stages after it, so
 * the figures of one settle add up to its whole time and say which step held
 * it (a database flush, the chain) rather than counting the chain's wait in
 * every stage that wraps it.
 */
export function runStages<C>(
  stages: readonly SettleStage<C>[],
  ctx: C,
  last: () => Answer,
  timeStage?: StageTimer,
  clock: () => number = () => performance.now(),
): Answer {
  const at = (i: number): Answer => {
    if (i === stages.length) return last();
    const stage = stages[i]!;
    return timed(
      stage.name,
      (next) => stage.run(ctx, next),
      () => at(i + 1),
      timeStage,
      clock,
    );
  };
  return at(0);
}

/** Runs one stage with `rest` as its `next`, timing its own part when there is a timer. */
function timed<A extends unknown[]>(
  name: string,
  run: (next: (...a: A) => Answer) => Answer,
  rest: (...a: A) => Answer,
  timeStage: StageTimer | undefined,
  clock: () => number,
): Answer {
  if (!timeStage) return run(rest);
  const started = clock();
  let inLater = 0;
  const next = async (...a: A): Answer => {
    const entered = clock();
    try {
      return await rest(...a);
    } finally {
      inLater += clock() - entered;
    }
  };
  const own = () => {
    // Timing only observes: a timer that fails must not change an answer
    // (a settle whose transfer landed is never turned into an error).
    try {
      timeStage(name, (clock() - started - inLater) / 1000);
    } catch {
      /* the figure is lost, the settle is not */
    }
  };
  let running: Answer;
  try {
    running = run(next);
  } catch (e) {
    running = Promise.reject(e);
  }
  return running.finally(own);
}
