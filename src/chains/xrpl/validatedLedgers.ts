/**
 * The validated ledger of one XRPL network as it advances, and a way to wait
 * for the next one. A payment is validated by a ledger close, so a settle
 * that asks the node every half second answers up to half a second late;
 * rippled's `ledger` stream (over its WebSocket, through the `xrpl`
 * package's `Client`) announces each validated ledger as it closes, and the
 * settle looks its transaction up at once.
 *
 * The stream is an accelerator, never a dependency: while it is down (not
 * configured, unreachable, dropped, or silent for too long) the index is
 * read over JSON-RPC and waits are the polling interval, as before. It
 * reconnects in the background with a growing delay.
 */
import { Client, type LedgerStream } from "xrpl";
import type { Logger } from "pino";
import { RecentRead } from "../familySupport.js";

/** A connected stream that announced no ledger for this long counts as down. */
const STREAM_SILENCE_MS = 10_000;
/** How long closing waits for the stream's socket to close. */
const DISCONNECT_WAIT_MS = 2_000;
/** Reconnection delays: doubling from the first to the last. */
const RECONNECT_FIRST_MS = 500;
const RECONNECT_MAX_MS = 30_000;

export interface ValidatedLedgersOptions {
  network: string;
  /** rippled's WebSocket; undefined: JSON-RPC polling only. */
  wsUrl: string | undefined;
  /** The validated ledger's index over JSON-RPC (the fallback). */
  readValidated: () => Promise<number>;
  /** The wait between two looks at the node while the stream is down. */
  pollMs: number;
  log?: Logger;
}

export class ValidatedLedgers {
  private readonly polled: RecentRead<number>;
  private client: Client | undefined;
  /** The last index the stream announced, and when (0: never on this connection). */
  private streamed = { index: 0, at: 0 };
  private readonly waiters = new Set<() => void>();
  private reconnectDelay = RECONNECT_FIRST_MS;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly opts: ValidatedLedgersOptions) {
    this.polled = new RecentRead(opts.readValidated, 250);
  }

  /** Whether ledgers arrive by the stream now (a test and metrics read it). */
  get streaming(): boolean {
    return this.streamed.at > 0 && Date.now() - this.streamed.at < STREAM_SILENCE_MS;
  }

  /** Reads the index once over JSON-RPC (the node must answer) and opens the stream behind it. */
  async start(): Promise<void> {
    await this.polled.get();
    if (this.opts.wsUrl) void this.connect();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    this.wakeAll();
    const client = this.client;
    this.client = undefined;
    // The package's disconnect waits for its socket's close event, which a
    // socket caught mid-connect to a node that went away may never emit:
    // closing waits for it a short while, never for ever.
    await Promise.race([
      client?.disconnect().catch(() => undefined),
      new Promise((resolve) => setTimeout(resolve, DISCONNECT_WAIT_MS).unref()),
    ]);
  }

  /** The validated ledger's index: the stream's latest, or a recent JSON-RPC read. */
  current(): Promise<number> {
    return this.streaming ? Promise.resolve(this.streamed.index) : this.polled.get();
  }

  /** The latest index known without asking the node (undefined while the stream is down). */
  known(): number | undefined {
    return this.streaming ? this.streamed.index : undefined;
  }

  /**
   * Resolves once a ledger after `seen` is validated (by the stream), or,
   * with no stream, after the polling interval; never later than `maxMs`.
   * The caller then looks again: a resolved wait promises nothing.
   */
  waitPast(seen: number | undefined, maxMs: number): Promise<void> {
    if (this.streaming && seen !== undefined && this.streamed.index > seen) {
      return Promise.resolve();
    }
    const wait = this.streaming
      ? Math.min(maxMs, STREAM_SILENCE_MS)
      : Math.min(maxMs, this.opts.pollMs);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, wait));
      this.waiters.add(done);
    });
  }

  private wakeAll(): void {
    for (const wake of [...this.waiters]) wake();
  }

  private onLedger(index: number): void {
    if (index <= this.streamed.index && this.streamed.at > 0) return;
    this.streamed = { index, at: Date.now() };
    this.wakeAll();
  }

  private async connect(): Promise<void> {
    if (this.closed || !this.opts.wsUrl) return;
    const client = new Client(this.opts.wsUrl, { connectionTimeout: 5_000, timeout: 10_000 });
    // An EventEmitter throws on an 'error' nobody listens to; a failed
    // connection is handled below, so these are only noted.
    client.on("error", (code: unknown, message: unknown) =>
      this.opts.log?.debug({ network: this.opts.network, code, message }, "xrpl stream error"),
    );
    client.on("ledgerClosed", (ledger: LedgerStream) => this.onLedger(ledger.ledger_index));
    client.on("disconnected", () => {
      if (this.client !== client) return;
      this.lost(client, "the ledger stream disconnected");
    });
    this.client = client;
    try {
      await client.connect();
      const subscribed = await client.request({ command: "subscribe", streams: ["ledger"] });
      if (this.client !== client) return;
      const index = Number((subscribed.result as { ledger_index?: number }).ledger_index);
      if (Number.isFinite(index) && index > 0) this.onLedger(index);
      this.reconnectDelay = RECONNECT_FIRST_MS;
      this.opts.log?.info({ network: this.opts.network }, "following validated ledgers by stream");
    } catch (e) {
      if (this.client === client) this.lost(client, (e as Error).message);
    }
  }

  /** The stream is gone: waits fall back to polling now, and a new connection is tried later. */
  private lost(client: Client, why: string): void {
    this.client = undefined;
    this.streamed = { index: this.streamed.index, at: 0 };
    // Waiters were timed for a stream; they look again and poll from here.
    this.wakeAll();
    // The package reconnects on its own but does not subscribe again;
    // one owner of the connection is simpler, so its client is let go.
    void client.disconnect().catch(() => undefined);
    if (this.closed) return;
    this.opts.log?.warn(
      { network: this.opts.network, retryMs: this.reconnectDelay, why },
      "xrpl ledger stream down; polling until it is back",
    );
    this.reconnectTimer = setTimeout(() => void this.connect(), this.reconnectDelay);
    this.reconnectTimer.unref();
    this.reconnectDelay = Math.min(this.reconnectDelay * 2, RECONNECT_MAX_MS);
  }
}
