/**
 * The `fetchFn` viem's HTTP transport calls for each JSON-RPC request (or
 * batch), built on undici's `request` over one keep-alive pool per origin.
 *
 * Why not the global `fetch`: every verification makes at least one RPC call
 * and every settle several, and Node's `fetch` builds a WHATWG `Request`,
 * `Response` and body stream around each one. On a busy service that
 * machinery cost more CPU than the JSON it carries. viem reads only a few
 * members of the response (`ok`, `status`, `statusText`, `headers.get`, and
 * the body as text), so the answer here is a small object with exactly those,
 * read from undici's plain body.
 *
 * What stays the same: viem still owns timeouts (it passes the abort signal,
 * which cancels the request here), retries, batching and error classes, and
 * a response larger than viem's limit is refused before it is all read.
 */
import { STATUS_CODES } from "node:http";
import { keepAliveAgent, postForText } from "../../../lib/boundedPost.js";

/** What viem's HTTP client reads from a response. */
export interface RpcResponse {
  ok: boolean;
  status: number;
  statusText: string;
  headers: { get(name: string): string | null };
  body: null;
  text(): Promise<string>;
}

function headerGetter(headers: Record<string, string | string[] | undefined>) {
  return {
    get(name: string): string | null {
      const v = headers[name.toLowerCase()];
      if (v === undefined) return null;
      return Array.isArray(v) ? v.join(", ") : v;
    },
  };
}

/**
 * A fetch for viem's `http({ fetchFn })`. One instance per transport: it
 * keeps its own connections, so closing a network's clients (or a test's)
 * does not touch another's.
 */
export function createRpcFetch(opts: { maxBodyBytes?: number } = {}) {
  const dispatcher = keepAliveAgent();

  const rpcFetch = async function rpcFetch(
    url: string | URL,
    init: {
      method?: string;
      headers?: Record<string, string>;
      body?: string;
      signal?: AbortSignal | null;
    },
  ): Promise<RpcResponse> {
    const res = await postForText(url, {
      dispatcher,
      headers: init.headers ?? {},
      body: init.body ?? null,
      signal: init.signal,
      ...(opts.maxBodyBytes !== undefined ? { maxBodyBytes: opts.maxBodyBytes } : {}),
    });
    return {
      ok: res.status >= 200 && res.status < 300,
      status: res.status,
      // undici gives no reason phrase; viem shows it when the body says nothing.
      statusText: STATUS_CODES[res.status] ?? "",
      headers: headerGetter(res.headers),
      body: null,
      text: () => Promise.resolve(res.text),
    };
  };
  // viem types its option as the global fetch; it uses only what RpcResponse has.
  return rpcFetch as unknown as typeof fetch;
}
