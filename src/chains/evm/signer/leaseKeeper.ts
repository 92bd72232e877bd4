/**
 * Keeps this replica's fair share of the facilitator accounts when several
 * replicas hold the same keys: renews leases on a heartbeat, takes or gives
 * up accounts, and hands them all back on a clean stop. An account taken
 * over from another replica resyncs its nonce from the chain.
 */
import type { Logger } from "../../../lib/logger.js";
import type { SignerLeases } from "../../ports.js";
import type { Lane, NonceLanes } from "./nonceLanes.js";

export interface LeaseSettings {
  port: SignerLeases;
  holder: string;
  ttlMs?: number;
  heartbeatMs?: number;
}

export class LeaseKeeper {
  private timer: NodeJS.Timeout | undefined;
  private validUntil = 0;

  constructor(
    private readonly network: string,
    private readonly lanes: NonceLanes,
    private readonly settings: LeaseSettings,
    private readonly log: Logger,
    /** Lanes with transactions in flight, which must not be given away. */
    private readonly busy: () => Set<Lane>,
  ) {}

  private get ttlMs(): number {
    return this.settings.ttlMs ?? 6_000;
  }

  /** Takes a share; after a crash, waits for the dead holder's leases to expire rather than start with none. */
  async start(): Promise<void> {
    const deadline = Date.now() + this.ttlMs + 1_000;
    await this.sync();
    while (!this.lanes.lanes.some((l) => l.leased) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 500));
      await this.sync();
    }
    this.timer = setInterval(() => void this.sync(), this.settings.heartbeatMs ?? 2_000);
    this.timer.unref();
  }

  /** Renews leases and adjusts to a fair share; newly taken accounts resync their nonce. */
  async sync(): Promise<void> {
    const busy = this.busy();
    try {
      const held = new Set(
        await this.settings.port.sync({
          network: this.network,
          addresses: this.lanes.addresses,
          holder: this.settings.holder,
          ttlMs: this.ttlMs,
          releasable: this.lanes.lanes
            .filter((l) => l.leased && !busy.has(l))
            .map((l) => l.account.address),
        }),
      );
      this.validUntil = Date.now() + this.ttlMs - 1_000;
      for (const lane of this.lanes.lanes) {
        const now = held.has(lane.account.address.toLowerCase());
        // Another replica may have used this account since we last held it.
        if (now && !lane.leased) this.lanes.forget(lane);
        lane.leased = now;
      }
    } catch (e) {
      this.log.warn({ err: String(e), network: this.network }, "could not renew signer leases");
      if (Date.now() > this.validUntil) for (const lane of this.lanes.lanes) lane.leased = false;
    }
  }

  /** Gives the leases back so other replicas take the accounts at once. */
  async release(): Promise<void> {
    this.stop();
    for (const lane of this.lanes.lanes) lane.leased = false;
    await this.settings.port.releaseAll(this.settings.holder).catch(() => undefined);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }
}
