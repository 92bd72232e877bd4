/**
 * Takes a facilitator account out of the rotation while its gas balance is
 * below the floor, and back in once topped up, with a log line and a report
 * for the metrics either way.
 */
import type { PublicClient } from "viem";
import type { Logger } from "../../../lib/logger.js";
import type { NonceLanes } from "./nonceLanes.js";

export interface SignerHealthSettings {
  /** Accounts below this balance (wei) leave the rotation. 0 disables the check. */
  minBalanceWei: bigint;
  checkEveryMs?: number;
  onSignerHealth?: (address: string, healthy: boolean, balanceWei: bigint) => void;
}

export class SignerHealthCheck {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly network: string,
    private readonly client: PublicClient,
    private readonly lanes: NonceLanes,
    private readonly settings: SignerHealthSettings,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    if (this.settings.minBalanceWei <= 0n) return;
    await this.check();
    this.timer = setInterval(() => void this.check(), this.settings.checkEveryMs ?? 30_000);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  async check(): Promise<void> {
    await Promise.all(
      this.lanes.lanes.map(async (lane) => {
        try {
          const balance = await this.client.getBalance({ address: lane.account.address });
          const healthy = balance >= this.settings.minBalanceWei;
          if (healthy !== lane.healthy) {
            this.log[healthy ? "info" : "warn"](
              {
                network: this.network,
                signer: lane.account.address,
                balanceWei: balance.toString(),
              },
              healthy ? "signer back in rotation" : "signer low on gas: taken out of rotation",
            );
          }
          lane.healthy = healthy;
          this.settings.onSignerHealth?.(lane.account.address, healthy, balance);
        } catch (e) {
          this.log.warn({ err: String(e), network: this.network }, "could not read signer balance");
        }
      }),
    );
  }
}
