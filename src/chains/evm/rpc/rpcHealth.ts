/**
 * Whether a network's RPC answers, as seen by every call made to it.
 *
 * The official mechanisms catch errors from the reads they make through our
 * signer and turn them into payment reasons (an RPC that cannot be reached
 * during a signature check reads as `invalid_exact_evm_signature`). So the
 * transport itself notes each transport failure, and the facilitator asks,
 * before believing a refusal, whether the chain failed while it was decided.
 */
import { HttpRequestError, SocketClosedError, TimeoutError, type Transport } from "viem";

export class RpcHealth {
  private lastFailureAt = 0;
  private lastSuccessAt = 0;

  failed(): void {
    this.lastFailureAt = Date.now();
  }

  succeeded(): void {
    this.lastSuccessAt = Date.now();
  }

  /** True when some call failed for a transport reason at or after `sinceMs`. */
  failedSince(sinceMs: number): boolean {
    return this.lastFailureAt >= sinceMs;
  }

  /** Whether the most recent outcome was a success (the reachability gauge). */
  get reachable(): boolean {
    return this.lastSuccessAt >= this.lastFailureAt;
  }
}

/** Failures of the transport (unreachable, timeout, HTTP error status), not of the call. */
function isTransportFailure(e: unknown): boolean {
  return (
    e instanceof HttpRequestError || e instanceof TimeoutError || e instanceof SocketClosedError
  );
}

/** Wraps a transport so every request reports its outcome to `health`. */
export function trackedTransport(transport: Transport, health: RpcHealth): Transport {
  return ((options: Parameters<Transport>[0]) => {
    const inner = transport(options);
    return {
      ...inner,
      request: (async (args: unknown, opts: unknown) => {
        try {
          const result = await (inner.request as (a: unknown, o: unknown) => Promise<unknown>)(
            args,
            opts,
          );
          health.succeeded();
          return result;
        } catch (e) {
          if (isTransportFailure(e)) health.failed();
          throw e;
        }
      }) as typeof inner.request,
    };
  }) as Transport;
}
