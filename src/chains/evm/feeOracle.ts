/**
 * EIP-1559 fees for one network, fetched at most once per interval rather
 * than once per transaction, with an operator-set ceiling.
 */
import type { PublicClient } from "viem";

export interface Fees {
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
}

export class GasPriceTooHighError extends Error {
  constructor(
    readonly maxFeePerGas: bigint,
    readonly ceiling: bigint,
  ) {
    super(`gas price ${maxFeePerGas} wei exceeds the configured ceiling of ${ceiling} wei`);
    this.name = "GasPriceTooHighError";
  }
}

export class FeeOracle {
  private cached: { fees: Fees; at: number } | undefined;
  private inflight: Promise<Fees> | undefined;

  constructor(
    private readonly client: PublicClient,
    private readonly refreshMs: number,
    /** Highest maxFeePerGas (wei) we will pay; undefined means no ceiling. */
    private readonly ceilingWei: bigint | undefined,
  ) {}

  async current(): Promise<Fees> {
    const now = Date.now();
    if (this.cached && now - this.cached.at < this.refreshMs) return this.cached.fees;
    this.inflight ??= this.client
      .estimateFeesPerGas()
      .then((f) => {
        const fees = { maxFeePerGas: f.maxFeePerGas, maxPriorityFeePerGas: f.maxPriorityFeePerGas };
        this.cached = { fees, at: Date.now() };
        return fees;
      })
      .finally(() => (this.inflight = undefined));
    return this.inflight;
  }

  /** Fees for a new transaction; throws GasPriceTooHighError over the ceiling. */
  async forNewTransaction(): Promise<Fees> {
    const fees = await this.current();
    this.assertUnderCeiling(fees.maxFeePerGas);
    return fees;
  }

  /** Bumped fees to replace a stuck transaction: at least +20%, as nodes require. */
  bump(previous: Fees, latest: Fees): Fees {
    const bump = (x: bigint) => (x * 120n) / 100n + 1n;
    const maxPriorityFeePerGas = [
      bump(previous.maxPriorityFeePerGas),
      latest.maxPriorityFeePerGas,
    ].reduce((a, b) => (a > b ? a : b));
    let maxFeePerGas = [bump(previous.maxFeePerGas), latest.maxFeePerGas].reduce((a, b) =>
      a > b ? a : b,
    );
    if (maxFeePerGas < maxPriorityFeePerGas) maxFeePerGas = maxPriorityFeePerGas;
    return { maxFeePerGas, maxPriorityFeePerGas };
  }

  assertUnderCeiling(maxFeePerGas: bigint): void {
    if (this.ceilingWei !== undefined && maxFeePerGas > this.ceilingWei) {
      throw new GasPriceTooHighError(maxFeePerGas, this.ceilingWei);
    }
  }
}
