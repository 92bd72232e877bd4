/**
 * rippled's JSON-RPC over HTTP: one POST per call, stateless, so a dropped
 * connection costs one request and never a subscription. (The `xrpl`
 * package's `Client` speaks only WebSocket; it is what payers use.)
 *
 * A transport failure (unreachable, timeout, HTTP 5xx, a body that is not
 * rippled's) is `ChainUnavailableError`: never the payer's fault. An answer
 * with `status: "error"` is rippled's own verdict and comes back as
 * `XrplRpcError` with its code (`actNotFound`, `txnNotFound`, …).
 */
import type { Dispatcher } from "undici";
import { ChainUnavailableError } from "../ports.js";
import { keepAliveAgent, postForText } from "../../lib/boundedPost.js";

export class XrplRpcError extends Error {
  constructor(
    readonly code: string,
    message: string,
    /** The whole error answer (`tx` adds `searched_all`, for one). */
    readonly data: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = "XrplRpcError";
  }
}

export interface XrplRpcOptions {
  network: string;
  url: string;
  timeoutMs?: number;
  /** Called on every transport failure (the family remembers when it last failed). */
  onTransportFailure?: (at: number) => void;
}

export class XrplRpc {
  readonly host: string;
  /**
   * Calls go over undici's `request` on a pool of kept-alive connections:
   * Node's `fetch` builds request, response and stream objects around each
   * call, and when every waiting settle looks its payment up at one ledger
   * close those cost the service more CPU than the calls themselves.
   */
  private readonly dispatcher: Dispatcher = keepAliveAgent();

  constructor(private readonly opts: XrplRpcOptions) {
    this.host = new URL(opts.url).host;
  }

  async call<T = Record<string, unknown>>(
    method: string,
    params: Record<string, unknown> = {},
  ): Promise<T> {
    let body: { result?: Record<string, unknown> } | undefined;
    try {
      const res = await postForText(this.opts.url, {
        dispatcher: this.dispatcher,
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ method, params: [{ api_version: 2, ...params }] }),
        signal: AbortSignal.timeout(this.opts.timeoutMs ?? 10_000),
      });
      if (res.status >= 500) throw new Error(`HTTP ${res.status}`);
      body = JSON.parse(res.text) as typeof body;
    } catch (e) {
      this.opts.onTransportFailure?.(Date.now());
      throw new ChainUnavailableError(
        this.opts.network,
        `the ${this.opts.network} RPC (${this.host}) could not be reached: ${(e as Error).message}`,
        { cause: e },
      );
    }
    const result = body?.result;
    if (!result || typeof result !== "object") {
      this.opts.onTransportFailure?.(Date.now());
      throw new ChainUnavailableError(
        this.opts.network,
        `the ${this.opts.network} RPC answered without a result`,
      );
    }
    if (result["status"] === "error") {
      const code = String(result["error"] ?? "unknown");
      if (
        code === "noNetwork" ||
        code === "noCurrent" ||
        code === "noClosed" ||
        code === "tooBusy"
      ) {
        this.opts.onTransportFailure?.(Date.now());
        throw new ChainUnavailableError(
          this.opts.network,
          `the ${this.opts.network} node is not in sync (${code})`,
        );
      }
      throw new XrplRpcError(code, String(result["error_message"] ?? code), result);
    }
    return result as T;
  }
}
