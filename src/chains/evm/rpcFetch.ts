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
import { Agent, request } from "undici";

/** What viem's HTTP client reads from a response. */
export interface RpcResponse {
  ok: boolean;
  status: number;
  statusText: string;
  headers: { get(name: string): string | null };
  body: null;
  text(): Promise<string>;
}

/** viem's own default for `maxResponseBodySize` (10 MiB). */
const MAX_BODY_BYTES = 10_485_760;

class RpcResponseTooLargeError extends Error {
  constructor(limit: number) {
    super(`the RPC response is larger than ${limit} bytes`);
    this.name = "RpcResponseTooLargeError";
  }
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
  const limit = opts.maxBodyBytes ?? MAX_BODY_BYTES;
  // Connections stay open between calls: an RPC provider is called many
  // times a second, and a TLS handshake per call would dominate.
  // No cap on connections, as with the global fetch: a URL that refuses
  // batches is called once per call, and those must not queue behind each
  // other here.
  const dispatcher = new Agent({ keepAliveTimeout: 30_000 });

  const rpcFetch = async function rpcFetch(
    url: string | URL,
    init: {
      method?: string;
      headers?: Record<string, string>;
      body?: string;
      signal?: AbortSignal | null;
    },
  ): Promise<RpcResponse> {
    const res = await request(url, {
      method: (init.method ?? "POST") as "POST",
      headers: init.headers ?? {},
      body: init.body ?? null,
      signal: init.signal ?? undefined,
      dispatcher,
    });
    const declared = Number(res.headers["content-length"]);
    if (Number.isFinite(declared) && declared > limit) {
      res.body.destroy();
      throw new RpcResponseTooLargeError(limit);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > limit) {
        res.body.destroy();
        throw new RpcResponseTooLargeError(limit);
      }
      chunks.push(chunk);
    }
    const text =
      chunks.length === 1 ? chunks[0]!.toString("utf8") : Buffer.concat(chunks).toString("utf8");
    return {
      ok: res.statusCode >= 200 && res.statusCode < 300,
      status: res.statusCode,
      // undici gives no reason phrase; viem shows it when the body says nothing.
      statusText: STATUS_CODES[res.statusCode] ?? "",
      headers: headerGetter(res.headers),
      body: null,
      text: () => Promise.resolve(text),
    };
  };
  // viem types its option as the global fetch; it uses only what RpcResponse has.
  return rpcFetch as unknown as typeof fetch;
}
