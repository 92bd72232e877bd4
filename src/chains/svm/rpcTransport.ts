/**
 * The transport under this service's one Solana RPC client per network: kit's
 * own JSON handling (integers as BigInt, as its HTTP transport reads them) over
 * undici's `request` on a keep-alive pool, instead of Node's `fetch`.
 *
 * Why: every verification simulates its transaction and every settle sends
 * and follows one, so the transport runs on every payment. Through `fetch`,
 * and through the official signer's habit of building a new RPC client for
 * each call when given a URL, the RPC machinery cost about a third of a
 * verification's CPU (see `docs/benchmarks.md`). Errors keep kit's shapes: a
 * non-2xx answer is kit's `SOLANA_ERROR__RPC__TRANSPORT_HTTP_ERROR`, a failed
 * connection undici's own error.
 */
import { STATUS_CODES } from "node:http";
import {
  SOLANA_ERROR__RPC__TRANSPORT_HTTP_ERROR,
  SolanaError,
  createSolanaRpcFromTransport,
  type RpcTransportMainnet,
} from "@solana/kit";
import { parseJsonWithBigInts, stringifyJsonWithBigInts } from "@solana/rpc-spec-types";
import { keepAliveAgent, postForText } from "../../lib/boundedPost.js";

const HEADERS = {
  accept: "application/json",
  "content-type": "application/json; charset=utf-8",
};

function createSolanaRpcTransport(url: string): RpcTransportMainnet {
  const dispatcher = keepAliveAgent();
  const transport = async <T>({
    payload,
    signal,
  }: {
    payload: unknown;
    signal?: AbortSignal;
  }): Promise<T> => {
    const answer = await postForText(url, {
      dispatcher,
      headers: HEADERS,
      body: stringifyJsonWithBigInts(payload),
      signal,
    });
    if (answer.status < 200 || answer.status >= 300) {
      throw new SolanaError(SOLANA_ERROR__RPC__TRANSPORT_HTTP_ERROR, {
        headers: new Headers(
          Object.entries(answer.headers).flatMap(([k, v]) =>
            v === undefined ? [] : [[k, Array.isArray(v) ? v.join(", ") : v] as [string, string]],
          ),
        ),
        message: STATUS_CODES[answer.status] ?? "",
        statusCode: answer.status,
      });
    }
    return parseJsonWithBigInts(answer.text) as T;
  };
  // The cluster brand only selects kit's mainnet method types; the URL is the operator's.
  return transport as RpcTransportMainnet;
}

/** kit's Solana RPC over `createSolanaRpcTransport`. */
export function createSolanaRpcClient(url: string) {
  return createSolanaRpcFromTransport(createSolanaRpcTransport(url));
}
