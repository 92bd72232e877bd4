/**
 * The discovery catalog's proof and staleness loop: checks the entries that
 * are due (features/catalog/ownershipChecker.ts), a batch at a time. A pass
 * that checked something is followed by the next after `busyPauseMs`, so a
 * backlog (every entry of a catalog the migration made due at once) is
 * worked through at about one batch a second, not as fast as the database
 * goes; an idle pass waits `pollIntervalMs`. It runs only here, never in a request: /verify and
 * /settle record a claim at most, and never wait for a resource server.
 * Replicas share the work through a lease on each claimed entry.
 */
import type { Logger } from "../lib/logger.js";
import { describeError } from "../lib/errors.js";
import type { CheckOutcome } from "../features/catalog/ownershipChecker.js";

export interface CatalogProofOptions {
  /** Checks the due entries; returns what it checked. */
  runDue: () => Promise<CheckOutcome[]>;
  log: Logger;
  /** How often an idle worker looks for due entries (default 10 s). */
  pollIntervalMs?: number;
  /** The pause after a pass that checked something (default 1 s). */
  busyPauseMs?: number;
}

export class CatalogProofWorker {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;
  private stopped = true;
  private readonly pollIntervalMs: number;
  private readonly busyPauseMs: number;

  constructor(private readonly opts: CatalogProofOptions) {
    this.pollIntervalMs = opts.pollIntervalMs ?? 10_000;
    this.busyPauseMs = opts.busyPauseMs ?? 1_000;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.schedule(0);
  }

  /** Stops the loop; a pass under way finishes first. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }

  /** One pass: the entries checked. */
  runOnce(): Promise<number> {
    this.running ??= this.opts
      .runDue()
      .then(
        (outcomes) => outcomes.length,
        (e: unknown) => {
          this.opts.log.warn({ err: describeError(e) }, "could not check catalog entries");
          return 0;
        },
      )
      .finally(() => (this.running = undefined));
    return this.running;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      void this.runOnce().then((checked) => this.schedule(checked > 0 ? 0 : this.pollIntervalMs));
    }, ms);
    this.timer.unref();
  }
}
