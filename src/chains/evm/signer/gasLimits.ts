/**
 * The gas limit for a call, decided before a nonce is taken, by a simulation
 * that proves it suffices.
 *
 * `eth_estimateGas` searches for the limit by executing the call many times;
 * under load it was the node's largest cost (on anvil, half a core at 130
 * settles a second). Calls of one shape (same contract, same function) cost
 * about the same, so after one estimate the limit is remembered with room to
 * spare, and each later call is checked with a single `eth_call` run under
 * that limit: a success means the transaction with that limit succeeds too
 * (on the state the simulation saw, as with an estimate). Anything else (a
 * revert, too little gas) falls back to a fresh estimate, which then either
 * throws the revert, as before, or raises the remembered limit.
 *
 * A remembered limit is re-estimated after `ttlMs`, so it follows what a
 * chain's gas prices put into gas units (the L1 part on some rollups), and
 * the new estimate replaces it: a limit raised by one costly call shrinks
 * back. What is remembered is capped per shape (gasCeilings.ts, the honest
 * cost times a small factor, without the contract-wallet allowance), so a
 * payer whose own call costs more (a wallet that burns gas in its signature
 * check) gets its own estimate and never raises the limit other payers get.
 *
 * Every simulation runs the transaction as it will be sent: from the
 * account that will send it, with the fees it will pay (so `tx.gasprice`
 * is not 0, which a payer's code could tell apart from a real transaction),
 * against the pending block, under the very gas limit it will carry. A call
 * that needs more than its shape's ceiling is refused here (GasLimitTooHighError).
 *
 * One estimate per shape at a time: calls of a shape with no limit yet (the
 * first burst after a start, or every call in flight when a limit expires)
 * wait for the estimate under way and are then checked under its limit,
 * instead of each sending an estimate of its own.
 *
 * The room kept is the same 20% as on a fresh estimate, not more: a block is
 * filled by gas limits, not by gas used, so a limit far above the call's
 * cost takes block space from other settlements. On a 30M-gas block, USDC's
 * `transferWithAuthorization` (about 74k used, 91k estimated) fits 220 times
 * under a 50% margin and 276 times under 20%. A call that needs more than
 * the remembered limit fails its simulation and raises the limit.
 */
import { toHex, type Hex, type PublicClient } from "viem";
import { GasLimitTooHighError, type Fees } from "../rpc/feeOracle.js";

export interface GasLimitOptions {
  /** Margin on a fresh estimate for the transaction itself (was and stays 20%). */
  estimateMarginPct?: number;
  /** Room on an estimate for the calls of the same shape that follow it (default 20%). */
  rememberMarginPct?: number;
  ttlMs?: number;
  now?: () => number;
}

/** A call as it will be sent. */
export interface SimulatedCall {
  to: Hex;
  data: Hex;
  value?: bigint;
}

/** What bounds a call's limit: the most it may be given, and the most remembered for its shape. */
export interface GasBounds {
  /** Above this nothing is sent (undefined: no bound). */
  ceiling: bigint | undefined;
  /** The most a limit learned from one call may be for the others of its shape. */
  remembered: bigint | undefined;
}

interface Remembered {
  gas: bigint;
  until: number;
}

const MAX_SHAPES = 1_000;

/** The transaction as JSON-RPC call parameters: our account, our fees, its gas limit. */
function callParams(from: Hex, call: SimulatedCall, fees: Fees, gas?: bigint): Record<string, Hex> {
  return {
    from,
    to: call.to,
    data: call.data,
    ...(call.value ? { value: toHex(call.value) } : {}),
    ...(gas !== undefined ? { gas: toHex(gas) } : {}),
    maxFeePerGas: toHex(fees.maxFeePerGas),
    maxPriorityFeePerGas: toHex(fees.maxPriorityFeePerGas),
  };
}

export class GasLimits {
  private readonly shapes = new Map<string, Remembered>();
  /** The estimate under way for a shape, which later calls of it wait for. */
  private readonly estimating = new Map<string, Promise<bigint>>();
  private readonly estimateMargin: bigint;
  private readonly rememberMargin: bigint;
  private readonly ttlMs: number;
  private readonly now: () => number;

  constructor(
    private readonly client: PublicClient,
    opts: GasLimitOptions = {},
  ) {
    this.estimateMargin = BigInt(100 + (opts.estimateMarginPct ?? 20));
    this.rememberMargin = BigInt(100 + (opts.rememberMarginPct ?? 20));
    this.ttlMs = opts.ttlMs ?? 60_000;
    this.now = opts.now ?? Date.now;
  }

  /**
   * Resolves with a limit the call fits in, proven by a simulation of the
   * transaction as it will be sent; throws what the node says when it would
   * revert, and GasLimitTooHighError when it needs more than `bounds.ceiling`.
   */
  async forCall(
    from: Hex,
    call: SimulatedCall,
    fees: Fees,
    bounds: GasBounds = { ceiling: undefined, remembered: undefined },
  ): Promise<bigint> {
    const shape = `${call.to.toLowerCase()}:${call.data.slice(0, 10)}`;
    let known = this.fresh(shape);
    const leader = this.estimating.get(shape);
    if (!known && leader) {
      // A burst of one shape with no limit yet (a first burst, or the limit
      // just expired) would otherwise send one estimate per call, each a
      // search of many executions on the node. Wait for the one under way,
      // once, and check this call under the limit it leaves. A leader that
      // failed (its own call reverts) leaves none: estimate as before.
      await leader.catch(() => undefined);
      known = this.fresh(shape);
    }
    if (known) {
      // No retry: a failure here is an answer (revert, too little gas),
      // and the estimate below is the second opinion.
      const ok = await this.simulate(from, call, fees, known.gas).then(
        () => true,
        () => false,
      );
      if (ok) return known.gas;
    }
    const estimate = await this.estimate(shape, from, call, fees, bounds);
    const { ceiling } = bounds;
    if (ceiling !== undefined && estimate > ceiling)
      throw new GasLimitTooHighError(estimate, ceiling);
    let limit = (estimate * this.estimateMargin) / 100n;
    if (ceiling !== undefined && limit > ceiling) limit = ceiling;
    // The estimate searched for the least gas that succeeds; the transaction
    // carries `limit`. Prove that one, as sent (a payer's code can tell the
    // gas it is given, too).
    await this.simulate(from, call, fees, limit);
    return limit;
  }

  /** One `eth_call` of the transaction as it will be sent; throws on a revert. */
  async simulate(from: Hex, call: SimulatedCall, fees: Fees, gas: bigint): Promise<void> {
    await this.client.request(
      { method: "eth_call", params: [callParams(from, call, fees, gas), "pending"] },
      { retryCount: 0 },
    );
  }

  /**
   * Estimates a call and remembers the limit for its shape, capped. The
   * first estimate of a shape under way is the one later calls wait for.
   */
  private estimate(
    shape: string,
    from: Hex,
    call: SimulatedCall,
    fees: Fees,
    bounds: GasBounds,
  ): Promise<bigint> {
    const run = (async () => {
      const estimate = BigInt(
        await this.client.request({
          method: "eth_estimateGas",
          params: [callParams(from, call, fees), "pending"],
        }),
      );
      if (this.shapes.size >= MAX_SHAPES) this.shapes.clear();
      const remembered = (estimate * this.rememberMargin) / 100n;
      const cap = bounds.remembered ?? bounds.ceiling;
      // A call costlier than the cap (a contract wallet's heavy check) has
      // its own limit and leaves the shape's alone: one payer's code never
      // raises what the others get.
      if (cap !== undefined && remembered > cap) return estimate;
      // Within the memory's life, keep the larger of the two: a shape's
      // costlier calls (a first payment to an address) should not shrink the
      // limit for the rest. An expired limit does not count: the fresh
      // estimate replaces it, so a raised limit comes back down.
      const previous = this.fresh(shape);
      const gas = previous && previous.gas > remembered ? previous.gas : remembered;
      this.shapes.set(shape, { gas, until: this.now() + this.ttlMs });
      return estimate;
    })();
    if (!this.estimating.has(shape)) {
      const tracked: Promise<bigint> = run.finally(() => this.estimating.delete(shape));
      tracked.catch(() => undefined); // its own caller sees the failure through `run`
      this.estimating.set(shape, tracked);
    }
    return run;
  }

  private fresh(shape: string): Remembered | undefined {
    const known = this.shapes.get(shape);
    return known && known.until > this.now() ? known : undefined;
  }
}
