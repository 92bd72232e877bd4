/**
 * A small closed-loop load generator: N workers, each sending its next
 * request as soon as the previous one answered, over keep-alive connections.
 */
import { Agent, request } from "undici";

export interface LoadResult {
  count: number;
  seconds: number;
  latenciesMs: number[];
  /** outcome label → count (e.g. "ok", an errorReason, "http_500"). */
  outcomes: Map<string, number>;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

export async function runLoad(opts: {
  url: string;
  headers: Record<string, string>;
  concurrency: number;
  /** Either a fixed list of bodies (each sent once) or a generator for a duration. */
  bodies?: string[];
  body?: (i: number) => string;
  durationMs?: number;
  /** Hard stop for a list that does not finish. */
  capMs?: number;
  classify: (status: number, json: unknown) => string;
}): Promise<LoadResult> {
  const agent = new Agent({
    connections: opts.concurrency,
    pipelining: 1,
    keepAliveTimeout: 60_000,
  });
  const latencies: number[] = [];
  const outcomes = new Map<string, number>();
  const start = performance.now();
  const deadline = opts.durationMs
    ? start + opts.durationMs
    : opts.capMs
      ? start + opts.capMs
      : Infinity;
  let next = 0;
  const total = opts.bodies?.length ?? Infinity;
  const worker = async () => {
    for (;;) {
      if (performance.now() > deadline) return;
      const i = next++;
      if (i >= total) return;
      const body = opts.bodies ? opts.bodies[i]! : opts.body!(i);
      const t0 = performance.now();
      let label: string;
      try {
        const res = await request(opts.url, {
          method: "POST",
          headers: { "content-type": "application/json", ...opts.headers },
          body,
          dispatcher: agent,
          headersTimeout: 120_000,
          bodyTimeout: 120_000,
        });
        const json = await res.body.json().catch(() => undefined);
        label = opts.classify(res.statusCode, json);
      } catch (e) {
        label = `transport_error:${(e as Error).name}`;
      }
      latencies.push(performance.now() - t0);
      outcomes.set(label, (outcomes.get(label) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency }, worker));
  const seconds = (performance.now() - start) / 1000;
  await agent.close();
  latencies.sort((a, b) => a - b);
  const notStarted = Number.isFinite(total) ? total - Math.min(next, total) : 0;
  if (notStarted > 0) outcomes.set("not_sent_before_cap", notStarted);
  return { count: latencies.length, seconds, latenciesMs: latencies, outcomes };
}
