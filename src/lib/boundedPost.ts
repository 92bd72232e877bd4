/**
 * One POST over undici's `request`, its answer read as text up to a size
 * limit: what an RPC client needs from HTTP, without the WHATWG `Request`,
 * `Response` and stream objects Node's `fetch` builds around every call. On a
 * busy service those cost more CPU than the JSON they carry (see
 * `docs/benchmarks.md`).
 */
import { Agent, request, type Dispatcher } from "undici";

/** A default bound on an answer (10 MiB, viem's own `maxResponseBodySize`). */
const MAX_ANSWER_BYTES = 10_485_760;

class RpcResponseTooLargeError extends Error {
  constructor(limit: number) {
    super(`the RPC response is larger than ${limit} bytes`);
    this.name = "RpcResponseTooLargeError";
  }
}

export interface PostedAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/**
 * A keep-alive connection pool for one client: an RPC provider is called many
 * times a second, and a handshake per call would dominate. No cap on
 * connections, as with the global fetch: calls must not queue behind each
 * other here.
 */
export function keepAliveAgent(): Agent {
  return new Agent({ keepAliveTimeout: 30_000 });
}

export async function postForText(
  url: string | URL,
  init: {
    dispatcher: Dispatcher;
    headers: Record<string, string>;
    body: string | null;
    signal?: AbortSignal | null | undefined;
    maxBodyBytes?: number;
    /**
     * Lets a POST share a pipelined connection with those before it: undici
     * holds a non-idempotent request, or one after a "blocking" one, until
     * the ones ahead are answered.
     */
    pipelined?: boolean;
  },
): Promise<PostedAnswer> {
  const limit = init.maxBodyBytes ?? MAX_ANSWER_BYTES;
  const res = await request(url, {
    method: "POST",
    headers: init.headers,
    body: init.body,
    signal: init.signal ?? undefined,
    dispatcher: init.dispatcher,
    ...(init.pipelined ? { idempotent: true, blocking: false } : {}),
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
  return { status: res.statusCode, headers: res.headers, text };
}
