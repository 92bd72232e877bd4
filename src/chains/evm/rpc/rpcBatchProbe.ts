/**
 * Finds out, once at start, which RPC URLs answer JSON-RPC batches.
 *
 * Batching is the largest throughput lever on the RPC side: under load,
 * dozens of concurrent verifications and settlements each make a few small
 * calls, and one HTTP request carrying them all costs the service (and the
 * provider's rate limit) far less than dozens. Most providers accept
 * batches, but not all, and one that refuses would fail every call, so each
 * URL is asked before batching is turned on for it. A URL that cannot be
 * reached at start is used without batching, the safe choice.
 */
import type { Logger } from "../../../lib/logger.js";

const PROBE = [
  { jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] },
  { jsonrpc: "2.0", id: 2, method: "eth_blockNumber", params: [] },
];

/** True when `url` answered a two-call batch with two results. */
export async function acceptsBatches(url: string, timeoutMs = 5_000): Promise<boolean> {
  try {
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(PROBE),
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (!res.ok) return false;
    const body = (await res.json()) as unknown;
    return (
      Array.isArray(body) &&
      body.length === 2 &&
      body.every((r) => typeof r === "object" && r !== null && "result" in r)
    );
  } catch {
    return false;
  }
}

/** The URLs, among `urls`, to batch; logs the ones that will not be. */
export async function batchingUrls(
  urls: readonly string[],
  log: Logger,
): Promise<ReadonlySet<string>> {
  const unique = [...new Set(urls)];
  const answers = await Promise.all(unique.map((u) => acceptsBatches(u)));
  const out = new Set<string>();
  unique.forEach((url, i) => {
    if (answers[i]) out.add(url);
    // The URL may carry an API key in its path or query: log the host only.
    else
      log.warn(
        { rpc: new URL(url).host },
        "RPC endpoint did not answer a JSON-RPC batch; calls to it are sent one by one",
      );
  });
  return out;
}
