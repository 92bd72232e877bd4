/**
 * EIP-1559 fees for one network, fetched at most once per interval rather
 * than once per transaction, with an operator-set ceiling.
 *
 * The offered maximum is twice the base fee plus the tip. A transaction
 * pays the base fee of the block that includes it, never its maximum, so the
 * headroom costs nothing; what it buys is inclusion while blocks are full.
 * Each full block raises the base fee by 12.5%, so the usual 1.2× (viem's
 * default) is overtaken after two full blocks, and every transaction priced
 * before that waits until the base fee falls again. Under a settle load that
 * fills blocks, that was every other block left nearly empty. 2× covers six
 * full blocks in a row.
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

/**
 * A call that needs more gas than one settlement may cost us: a token or
 * wallet that burns gas, or a payload far larger than any honest payment.
 */
export class GasLimitTooHighError extends Error {
  constructor(
    readonly gas: bigint,
    readonly ceiling: bigint,
  ) {
    super(
      `the settlement would need ${gas} gas, above the ceiling of ${ceiling} for this payment's shape (at most EVM_MAX_GAS_PER_TX); nothing was sent`,
    );
    this.name = "GasLimitTooHighError";
  }
}

/** The multiple of the current base fee a new transaction offers. */
const BASE_FEE_HEADROOM = 2n;

/** Fees as read from the chain, with the base fee they were computed from (absent on a chain without one). */
interface Reading {
  fees: Fees;
  baseFeePerGas: bigint | undefined;
}

export class FeeOracle {
  private cached: { reading: Reading; at: number } | undefined;
  private inflight: Promise<Reading> | undefined;

  constructor(
    private readonly client: PublicClient,
    private readonly refreshMs: number,
    /** Highest maxFeePerGas (wei) we will pay; undefined means no ceiling. */
    private readonly ceilingWei: bigint | undefined,
  ) {}

  async current(): Promise<Fees> {
    return (await this.reading()).fees;
  }

  /** The latest base fee (undefined on a chain without one), from the same cached reading. */
  async baseFee(): Promise<bigint | undefined> {
    return (await this.reading()).baseFeePerGas;
  }

  private async reading(): Promise<Reading> {
    const now = Date.now();
    if (this.cached && now - this.cached.at < this.refreshMs) return this.cached.reading;
    this.inflight ??= this.read()
      .then((reading) => {
        this.cached = { reading, at: Date.now() };
        return reading;
      })
      .finally(() => (this.inflight = undefined));
    return this.inflight;
  }

  private async read(): Promise<Reading> {
    const [block, tip] = await Promise.all([
      this.client.getBlock({ blockTag: "latest" }),
      this.client.estimateMaxPriorityFeePerGas(),
    ]);
    const base = block.baseFeePerGas;
    // A chain without a base fee: viem's estimate says what it supports.
    if (base === null || base === undefined) {
      const f = await this.client.estimateFeesPerGas();
      return {
        fees: { maxFeePerGas: f.maxFeePerGas, maxPriorityFeePerGas: f.maxPriorityFeePerGas },
        baseFeePerGas: undefined,
      };
    }
    return {
      fees: { maxFeePerGas: base * BASE_FEE_HEADROOM + tip, maxPriorityFeePerGas: tip },
      baseFeePerGas: base,
    };
  }

  /**
   * Fees for a new transaction. Over the operator's ceiling the maximum is
   * lowered to it, as long as today's price (the base fee plus the tip) is
   * still under it; otherwise GasPriceTooHighError.
   */
  async forNewTransaction(): Promise<Fees> {
    const { fees, baseFeePerGas } = await this.reading();
    if (this.ceilingWei === undefined || fees.maxFeePerGas <= this.ceilingWei) return fees;
    this.assertUnderCeiling(
      baseFeePerGas === undefined ? fees.maxFeePerGas : baseFeePerGas + fees.maxPriorityFeePerGas,
    );
    return { ...fees, maxFeePerGas: this.ceilingWei };
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
