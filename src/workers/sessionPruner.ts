/**
 * Removes expired dashboard sessions now and then. An expired session is
 * already refused on every request; this only keeps the table from growing
 * with sign-ins nobody ended.
 */
import type { Logger } from "../lib/logger.js";

export interface SessionPruner {
  stop(): void;
}

export function startSessionPruner(
  prune: () => Promise<number>,
  log: Logger,
  everyMs = 60 * 60 * 1000,
): SessionPruner {
  const run = () =>
    prune()
      .then((n) => {
        if (n > 0) log.info({ sessions: n }, "removed expired dashboard sessions");
      })
      .catch((e: unknown) => log.warn({ err: String(e) }, "could not remove expired sessions"));
  void run();
  const timer = setInterval(() => void run(), everyMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
