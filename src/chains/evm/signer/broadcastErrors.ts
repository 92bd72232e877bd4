/**
 * What can go wrong between "send this call" and "the node has it", named so
 * the signer can answer precisely: no account may send it, or the node's
 * answer was lost (the outcome is unknown and must be followed, never
 * reported as a failure).
 */
import { BaseError, HttpRequestError, TimeoutError, type Hex } from "viem";

/** The one account a call must come from cannot send it on this replica now. */
export class SignerUnavailableError extends Error {
  constructor(network: string, address: string, why: string) {
    super(`the facilitator account ${address} on ${network} ${why}`);
    this.name = "SignerUnavailableError";
  }
}

export class NoHealthySignerError extends Error {
  constructor(network: string) {
    super(
      `no facilitator account on ${network} is usable by this replica: each is below its minimum gas balance or leased to another replica`,
    );
    this.name = "NoHealthySignerError";
  }
}

/**
 * The node's answer to a broadcast was lost (timeout, dropped connection):
 * the transaction may or may not be in its pool. The caller must treat the
 * settlement as pending, never as failed.
 */
export class AmbiguousBroadcastError extends Error {
  constructor(
    readonly hash: Hex,
    cause: unknown,
  ) {
    super(`transaction ${hash} was sent but the node's answer was lost`, { cause });
    this.name = "AmbiguousBroadcastError";
  }
}

export function isTransportError(e: unknown): boolean {
  if (!(e instanceof BaseError)) return false;
  return !!e.walk((c) => c instanceof HttpRequestError || c instanceof TimeoutError);
}

function describe(e: unknown): string {
  return e instanceof BaseError ? `${e.details} ${e.shortMessage}` : String(e);
}

export function isAlreadyKnown(e: unknown): boolean {
  return /already known|already imported|known transaction/i.test(describe(e));
}

export function isNonceError(e: unknown): boolean {
  return /nonce too low|nonce.*already|already known|replacement transaction underpriced|NonceTooLow/i.test(
    describe(e),
  );
}
