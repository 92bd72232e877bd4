/**
 * Replaces a transaction not mined within `stuckAfterMs` with the same nonce
 * and higher fees, up to a few times; whichever version is mined answers the
 * waiter. Never beyond the gas-price ceiling.
 */
import type { Hex, PublicClient, TransactionReceipt } from "viem";
import type { Logger } from "../../../lib/logger.js";
import type { FeeOracle, Fees } from "../rpc/feeOracle.js";
import type { Lane } from "./nonceLanes.js";
import type { Broadcaster } from "./broadcaster.js";
import { isNonceError } from "./broadcastErrors.js";

const MAX_BUMPS = 5;

/** A transaction in flight, with every version of it sent so far. */
export interface InFlight {
  lane: Lane;
  nonce: number;
  to: Hex;
  data: Hex;
  gas: bigint;
  /** Native value sent along (gas funding), which a replacement must carry too. */
  value?: bigint;
  fees: Fees;
  hashes: Hex[];
  receipt: Promise<TransactionReceipt>;
  resolve(r: TransactionReceipt): void;
  timer: NodeJS.Timeout | undefined;
  bumps: number;
  /** When the node first accepted it (performance.now()), for the inclusion time. */
  acceptedAt: number;
  /** Its hold on the failed-gas budget (src/chains/failedFeeBudget.ts), given back once mined. */
  budgetHold?: symbol;
}

export interface ReplacementHooks {
  /** Whether any version of this transaction is still awaited. */
  stillWaiting(f: InFlight): boolean;
  /** A version was found mined. */
  mined(f: InFlight, r: TransactionReceipt): void;
  /** A replacement was sent: follow it too. */
  replaced(f: InFlight, hash: Hex): void;
}

export class Replacement {
  constructor(
    private readonly network: string,
    private readonly client: PublicClient,
    private readonly fees: FeeOracle,
    private readonly broadcaster: Broadcaster,
    private readonly stuckAfterMs: number,
    private readonly hooks: ReplacementHooks,
    private readonly log: Logger,
  ) {}

  schedule(f: InFlight): void {
    f.timer = setTimeout(() => void this.bump(f), this.stuckAfterMs);
    f.timer.unref();
  }

  private async bump(f: InFlight): Promise<void> {
    f.timer = undefined;
    if (f.bumps >= MAX_BUMPS) return;
    const previous = f.hashes[f.hashes.length - 1]!;
    try {
      // It may have been mined in a block the watcher has not read yet.
      const existing = await this.client
        .getTransactionReceipt({ hash: previous })
        .catch(() => undefined);
      if (existing) return this.hooks.mined(f, existing);
      const fees = this.fees.bump(f.fees, await this.fees.current());
      this.fees.assertUnderCeiling(fees.maxFeePerGas);
      const hash = await this.broadcaster.send(
        f.lane,
        f.nonce,
        { to: f.to, data: f.data, gas: f.gas, ...(f.value ? { value: f.value } : {}) },
        fees,
        previous,
      );
      f.fees = fees;
      f.bumps++;
      f.hashes.push(hash);
      this.hooks.replaced(f, hash);
      this.log.warn(
        { network: this.network, replaced: previous, by: hash, nonce: f.nonce },
        "replaced a stuck transaction with higher fees",
      );
    } catch (e) {
      if (isNonceError(e)) {
        // The nonce is used: one of our versions was mined. The watcher will
        // report it; check directly in case it was mined before we watched.
        for (const h of f.hashes) {
          const r = await this.client.getTransactionReceipt({ hash: h }).catch(() => undefined);
          if (r) return this.hooks.mined(f, r);
        }
      } else {
        this.log.warn({ err: String(e), tx: previous }, "could not replace a stuck transaction");
      }
    }
    if (this.hooks.stillWaiting(f)) this.schedule(f);
  }
}
