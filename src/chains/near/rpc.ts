/**
 * nearcore's JSON-RPC over HTTP, one POST per call.
 *
 * `@near-js/providers`' `JsonRpcProvider` is what payers use; the service
 * does not, for two reasons: it retries a failing node up to twelve times
 * with a growing back-off (a minute of waiting where an outage must be a
 * prompt 503), and it flattens nearcore's structured error (`cause.name`,
 * `cause.info`) into a message, where verify needs the cause to tell an
 * unknown account from an unknown key from a node that is behind.
 *
 * A transport failure (unreachable, timeout, HTTP 5xx, a body that is not
 * JSON-RPC, a node that is syncing or timed out) is `ChainUnavailableError`:
 * never the payer's fault. nearcore's own verdicts come back as
 * `NearRpcError` with the cause name (`UNKNOWN_ACCOUNT`,
 * `UNKNOWN_ACCESS_KEY`, `INVALID_TRANSACTION`, `UNKNOWN_TRANSACTION`, …).
 */
import type { Dispatcher } from "undici";
import { ChainUnavailableError } from "../ports.js";
import { keepAliveAgent, postForText } from "../../lib/boundedPost.js";

export class NearRpcError extends Error {
  constructor(
    /** nearcore's `cause.name`, e.g. `UNKNOWN_ACCOUNT`. */
    readonly causeName: string,
    /** `cause.info` and `data`, as the node sent them. */
    readonly info: Record<string, unknown>,
    message: string,
  ) {
    super(message);
    this.name = "NearRpcError";
  }

  /** Whether any part of the error names `kind` (nearcore nests the invalid-transaction kind). */
  names(kind: string): boolean {
    return JSON.stringify(this.info).includes(`"${kind}"`);
  }
}

/** Causes that say the node could not answer now, not that the answer is no. */
const UNAVAILABLE = new Set([
  "TIMEOUT_ERROR",
  "NO_SYNCED_BLOCKS",
  "NOT_SYNCED_YET",
  "INTERNAL_ERROR",
  "UNAVAILABLE_SHARD",
  "UNKNOWN_BLOCK",
]);

export interface NearRpcOptions {
  network: string;
  url: string;
  timeoutMs?: number;
  /** Called on every transport failure (the family remembers when it last failed). */
  onTransportFailure?: (at: number) => void;
}

let nextId = 1;

export class NearRpc {
  readonly host: string;
  /**
   * Over undici's `request` on kept-alive connections, not `fetch`: each
   * payment takes several calls (its access key, its accounts, the send),
   * and `fetch`'s request, response and stream objects cost more CPU than
   * their JSON on a busy service.
   */
  private readonly dispatcher: Dispatcher = keepAliveAgent();

  constructor(private readonly opts: NearRpcOptions) {
    this.host = new URL(opts.url).host;
  }

  async call<T = Record<string, unknown>>(
    method: string,
    params: Record<string, unknown> | unknown[],
    timeoutMs = this.opts.timeoutMs ?? 10_000,
  ): Promise<T> {
    const unavailable = (why: string, cause?: unknown) => {
      this.opts.onTransportFailure?.(Date.now());
      return new ChainUnavailableError(
        this.opts.network,
        `the ${this.opts.network} RPC (${this.host}) could not answer: ${why}`,
        { cause },
      );
    };
    let body: { result?: unknown; error?: Record<string, unknown> } | undefined;
    try {
      const res = await postForText(this.opts.url, {
        dispatcher: this.dispatcher,
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: nextId++, method, params }),
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (res.status >= 500) throw new Error(`HTTP ${res.status}`);
      body = JSON.parse(res.text) as typeof body;
    } catch (e) {
      throw unavailable((e as Error).message, e);
    }
    if (body?.error) {
      const cause = body.error["cause"] as { name?: string; info?: unknown } | undefined;
      const name = String(cause?.name ?? body.error["name"] ?? "UNKNOWN_ERROR");
      if (UNAVAILABLE.has(name)) throw unavailable(name);
      const data = body.error["data"];
      throw new NearRpcError(
        name,
        { ...((cause?.info as object) ?? {}), ...(typeof data === "object" && data ? data : {}) },
        typeof data === "string" ? data : String(body.error["message"] ?? name),
      );
    }
    if (body === undefined || !("result" in body)) throw unavailable("an answer without a result");
    const result = body.result as Record<string, unknown> | undefined;
    // Older nodes answer some query failures inside the result.
    if (result && typeof result === "object" && typeof result["error"] === "string") {
      const text = result["error"];
      const name = /does not exist while viewing/.test(text)
        ? /access key/.test(text)
          ? "UNKNOWN_ACCESS_KEY"
          : "UNKNOWN_ACCOUNT"
        : "CONTRACT_EXECUTION_ERROR";
      throw new NearRpcError(name, {}, text);
    }
    return result as T;
  }

  /** A `query` of `request_type` at final finality. */
  query<T = Record<string, unknown>>(
    requestType: string,
    params: Record<string, unknown>,
  ): Promise<T> {
    return this.call<T>("query", { request_type: requestType, finality: "final", ...params });
  }

  /** A view call on a contract at final finality, its JSON result parsed. */
  async view<T>(contract: string, method: string, args: Record<string, unknown>): Promise<T> {
    const r = await this.query<{ result: number[] }>("call_function", {
      account_id: contract,
      method_name: method,
      args_base64: Buffer.from(JSON.stringify(args)).toString("base64"),
    });
    const text = Buffer.from(r.result).toString("utf8");
    return (text === "" ? undefined : JSON.parse(text)) as T;
  }
}
