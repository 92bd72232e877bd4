/**
 * A small load generator over keep-alive connections, in one of two shapes:
 *
 * - closed loop (the default): N workers, each sending its next request as
 *   soon as the previous one answered;
 * - open loop (`ratePerSecond`): request i is due at i / rate seconds, the
 *   way independent clients arrive, with at most N in flight.
 *
 * The two differ on a chain. In a closed loop every settle mined in a block
 * is answered at once, and its worker's next request then waits for the
 * following block: the workers fall into step with the blocks and each
 * settle takes a whole block time, however fast the service is. Arrivals
 * that do not wait for answers meet the block at a random point and wait
 * half a block on average, which is what a paid API sees from many clients.
 * An open-loop latency runs from the moment the request was due, so a
 * request held back by the in-flight cap counts its wait.
 */
import { Agent, request } from "undici";

export interface LoadResult {
  /** Answers counted (a timed run: those that came within its time). */
  count: number;
  /** How long it ran (a timed run: the time it was given). */
  seconds: number;
  /** Requests sent, answered in time or not: the bodies the run used up. */
  sent: number;
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
  /**
   * Or `count` bodies made as they are needed (signed just ahead of their
   * turn): a request's latency starts once its body is ready, and a wait
   * for one counts in the run's time.
   */
  nextBody?: { count: number; take: (i: number) => Promise<string> };
  durationMs?: number;
  /** Hard stop for a list that does not finish. */
  capMs?: number;
  /** Open loop: requests are due at this rate, with at most `concurrency` in flight. */
  ratePerSecond?: number;
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
  const total = opts.bodies?.length ?? opts.nextBody?.count ?? Infinity;
  const worker = async () => {
    for (;;) {
      if (performance.now() > deadline) return;
      const i = next++;
      if (i >= total) return;
      const body = opts.bodies
        ? opts.bodies[i]!
        : opts.nextBody
          ? await opts.nextBody.take(i)
          : opts.body!(i);
      let t0 = performance.now();
      if (opts.ratePerSecond) {
        const due = start + (i * 1000) / opts.ratePerSecond;
        if (due > t0) await new Promise((r) => setTimeout(r, due - t0));
        t0 = due;
      }
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
      const doneAt = performance.now();
      // A timed run counts what was answered within its time: an answer still
      // in flight at the end would stretch the run by the server's tail
      // latency, which charges a slow server once per run (per round, when a
      // phase runs in rounds) instead of measuring it.
      if (opts.durationMs && doneAt > deadline) return;
      latencies.push(doneAt - t0);
      outcomes.set(label, (outcomes.get(label) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency }, worker));
  const seconds = opts.durationMs ? opts.durationMs / 1000 : (performance.now() - start) / 1000;
  await agent.close();
  latencies.sort((a, b) => a - b);
  const notStarted = Number.isFinite(total) ? total - Math.min(next, total) : 0;
  if (notStarted > 0) outcomes.set("not_sent_before_cap", notStarted);
  return {
    count: latencies.length,
    seconds,
    sent: Math.min(next, total),
    latenciesMs: latencies,
    outcomes,
  };
}

/** Several runs against one server as one result: counts and times added, latencies pooled. */
export function mergeLoadResults(runs: readonly LoadResult[]): LoadResult {
  const outcomes = new Map<string, number>();
  for (const r of runs)
    for (const [k, n] of r.outcomes) outcomes.set(k, (outcomes.get(k) ?? 0) + n);
  return {
    count: runs.reduce((a, r) => a + r.count, 0),
    seconds: runs.reduce((a, r) => a + r.seconds, 0),
    sent: runs.reduce((a, r) => a + r.sent, 0),
    latenciesMs: runs.flatMap((r) => r.latenciesMs).sort((a, b) => a - b),
    outcomes,
  };
}
