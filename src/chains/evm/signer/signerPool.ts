/**
 * The facilitator's accounts on one network, and the transactions they send.
 * It composes the parts that each do one job:
 * - nonceLanes.ts: a local nonce per account, so concurrent settlements
 *   pipeline into the mempool instead of colliding;
 * - broadcaster.ts: sign, journal (before it leaves), broadcast;
 * - replacement.ts: same nonce, higher fees, for a transaction that is stuck;
 * - leaseKeeper.ts: this replica's share of the accounts;
 * - signerHealth.ts: an account low on gas leaves the rotation.
 *
 * Every call is simulated (gasLimits.ts) before a nonce is taken, as it will
 * be sent (our account, our fees, the pending block, its gas limit), so a
 * payment that would revert costs neither gas nor a nonce; and no call gets
 * more gas than its shape's ceiling (gasCeilings.ts).
 */
import type { Chain, Hex, PublicClient, TransactionReceipt } from "viem";
import type { Logger } from "../../../lib/logger.js";
import type { TransactionJournal, TransactionPhase } from "../../ports.js";
import type { FeeOracle, Fees } from "../rpc/feeOracle.js";
import { ReceiptWatcher } from "./receiptWatcher.js";
import { currentSettlement, outsideSettlementScope } from "../../settlementScope.js";
import { NonceLanes, type Lane } from "./nonceLanes.js";
import { Broadcaster } from "./broadcaster.js";
import { Replacement, type InFlight } from "./replacement.js";
import { LeaseKeeper, type LeaseSettings } from "./leaseKeeper.js";
import { SignerHealthCheck } from "./signerHealth.js";
import { GasLimits } from "./gasLimits.js";
import { GasLimitTooHighError } from "../rpc/feeOracle.js";
import { gasCeilingFor, shapeOf } from "../payment/gasCeilings.js";
import { UNKNOWN_PAYER_CODE, type PayerCode } from "./payerCode.js";
import { FailedFeeBudget } from "../../failedFeeBudget.js";
import { AmbiguousBroadcastError, isNonceError } from "./broadcastErrors.js";

export { NoHealthySignerError, SignerUnavailableError } from "./broadcastErrors.js";

export interface SignerPoolOptions {
  network: string;
  chain: Chain;
  client: PublicClient;
  privateKeys: readonly Hex[];
  journal: TransactionJournal;
  fees: FeeOracle;
  log: Logger;
  /** Block-following tick for receipts. */
  receiptTickMs: number;
  /** Replace a transaction not mined after this long. */
  stuckAfterMs: number;
  /** Accounts below this balance (wei) leave the rotation. 0 disables the check. */
  minBalanceWei: bigint;
  /** The most gas one transaction may be given; above it nothing is sent. */
  maxGasPerTransaction?: bigint;
  /** Hourly budget (wei) for transactions that fail on-chain, in flight included; undefined: none. */
  failedGasBudgetWei?: bigint | undefined;
  balanceCheckMs?: number;
  onSignerHealth?: (address: string, healthy: boolean, balanceWei: bigint) => void;
  /** A transaction's broadcast time, and its time from acceptance to receipt. */
  onPhase?: (phase: TransactionPhase, seconds: number) => void;
  /** What a mined transaction of ours cost, in wei. */
  onFeePaid?: (status: "success" | "reverted", wei: bigint) => void;
  /**
   * Cross-replica leasing of the accounts (several replicas, one key set).
   * Without it this process uses every account.
   */
  leases?: LeaseSettings;
}

export class EvmSignerPool {
  readonly addresses: readonly `0x${string}`[];
  private readonly lanes: NonceLanes;
  private readonly watcher: ReceiptWatcher;
  private readonly broadcaster: Broadcaster;
  private readonly replacement: Replacement;
  private readonly leases: LeaseKeeper | undefined;
  private readonly health: SignerHealthCheck;
  private readonly gasLimits: GasLimits;
  private readonly failedGas: FailedFeeBudget;
  /** Keyed by every hash of a transaction (original and replacements). */
  private readonly inflight = new Map<string, InFlight>();

  constructor(private readonly opts: SignerPoolOptions) {
    const { network, client, log } = opts;
    this.lanes = new NonceLanes(network, client, opts.privateKeys, !opts.leases);
    this.addresses = this.lanes.addresses;
    this.gasLimits = new GasLimits(client);
    const journal = opts.journal;
    this.failedGas = new FailedFeeBudget(
      network,
      opts.failedGasBudgetWei,
      Date.now,
      journal.failedFeeExposure ? (since) => journal.failedFeeExposure!(network, since) : undefined,
    );
    this.watcher = new ReceiptWatcher(client, opts.receiptTickMs, (e) =>
      log.warn({ err: String(e), network }, "receipt watcher: RPC error"),
    );
    this.broadcaster = new Broadcaster(network, opts.chain, client, opts.journal, this.lanes, log);
    this.replacement = new Replacement(
      network,
      client,
      opts.fees,
      this.broadcaster,
      opts.stuckAfterMs,
      {
        stillWaiting: (f) => f.hashes.some((h) => this.inflight.has(h.toLowerCase())),
        mined: (f, r) => this.settleInFlight(f, r),
        replaced: (f, hash) => {
          this.inflight.set(hash.toLowerCase(), f);
          this.watchHash(f, hash);
        },
      },
      log,
    );
    this.leases = opts.leases
      ? new LeaseKeeper(network, this.lanes, opts.leases, log, () => this.busyLanes())
      : undefined;
    this.health = new SignerHealthCheck(
      network,
      client,
      this.lanes,
      {
        minBalanceWei: opts.minBalanceWei,
        ...(opts.balanceCheckMs !== undefined ? { checkEveryMs: opts.balanceCheckMs } : {}),
        ...(opts.onSignerHealth ? { onSignerHealth: opts.onSignerHealth } : {}),
      },
      log,
    );
  }

  /** The hourly budget for failed transactions (wei), when there is one. */
  get failedGasBudgetWei(): bigint | undefined {
    return this.failedGas.budget;
  }

  /** Takes this replica's share of the accounts, then starts the gas-balance check. */
  async start(): Promise<void> {
    await this.leases?.start();
    await this.health.start();
    // A restarted process remembers the hour's failures of every replica.
    await this.failedGas.refresh();
  }

  /** Gives the leases back so other replicas take the accounts at once. */
  async release(): Promise<void> {
    await this.leases?.release();
  }

  stop(): void {
    this.leases?.stop();
    this.health.stop();
    this.watcher.stop();
    for (const f of new Set(this.inflight.values())) if (f.timer) clearTimeout(f.timer);
  }

  private busyLanes(): Set<Lane> {
    return new Set([...this.inflight.values()].map((f) => f.lane));
  }

  /**
   * Simulates, signs, journals and broadcasts a call. Resolves with the
   * transaction hash once the node accepted it.
   */
  async send(call: {
    to: Hex;
    data: Hex;
    gas?: bigint;
    from?: Hex;
    /** Native value (wei): only the gas funding of a sponsored approval sends any. */
    value?: bigint;
    /**
     * The most gas this call may be given, when the caller knows its shape
     * better than its selector says (a wallet deployment through a factory).
     */
    ceiling?: bigint;
    /** What the settlement's payer carries (payerCode.ts); absent: nothing known. */
    payerCode?: PayerCode;
  }): Promise<Hex> {
    const started = performance.now();
    const lane = call.from ? this.lanes.named(call.from) : this.lanes.pick();
    const fees = await this.opts.fees.forNewTransaction();
    const ceiling = this.ceilingFor(call);
    // Simulation first, of the transaction as it will be sent: a call that
    // would revert throws here, before a nonce or any gas is spent.
    let gas: bigint;
    if (call.gas === undefined) {
      gas = await this.gasLimits.forCall(lane.account.address, call, fees, {
        ceiling,
        remembered: shapeOf(call.data)?.remembered ?? ceiling,
      });
    } else {
      if (ceiling !== undefined && call.gas > ceiling) {
        throw new GasLimitTooHighError(call.gas, ceiling);
      }
      gas = call.gas;
      await this.gasLimits.simulate(lane.account.address, call, fees, gas);
    }
    const tx = { to: call.to, data: call.data, gas, ...(call.value ? { value: call.value } : {}) };
    // What it would cost if it reverted must fit the hour's failure budget.
    const hold = this.failedGas.reserve(
      gas * fees.maxFeePerGas,
      undefined,
      undefined,
      call.payerCode?.hasCode,
    );
    for (let attempt = 0; ; attempt++) {
      const nonce = await this.lanes.takeNonce(lane).catch((e: unknown) => {
        this.failedGas.finish(hold, false, 0n);
        throw e;
      });
      try {
        const hash = await this.broadcaster.send(lane, nonce, tx, fees);
        this.failedGas.journaled(hold);
        this.track(lane, nonce, tx, fees, hash, hold);
        this.reportPhase("broadcast", started);
        return hash;
      } catch (e) {
        if (e instanceof AmbiguousBroadcastError) {
          // It may be in the pool: keep its nonce, follow it like any other
          // transaction, and let the caller report the settlement as pending.
          this.failedGas.journaled(hold);
          this.track(lane, nonce, tx, fees, e.hash, hold);
          const scope = currentSettlement()?.notes;
          if (scope) scope.ambiguousReference = e.hash;
          throw e;
        }
        if (isNonceError(e) && attempt < 2) {
          // Someone else used this account's nonce (another process, a
          // restart): resynchronise from the chain and try again.
          this.lanes.forget(lane);
          continue;
        }
        // The nonce was taken but nothing was accepted: fill the gap so later
        // transactions from this account are not stuck behind it. The filler
        // is the account's, not the settlement's: journaled unbound, so a
        // settlement already decided (its send refused) cannot refuse it.
        void outsideSettlementScope(() => this.broadcaster.fillGap(lane, nonce, fees));
        this.failedGas.finish(hold, false, 0n);
        throw e;
      }
    }
  }

  /** The call's shape's ceiling, under the operator's and the caller's. */
  private ceilingFor(call: {
    data: Hex;
    ceiling?: bigint;
    payerCode?: PayerCode;
  }): bigint | undefined {
    const shaped = gasCeilingFor(
      call.data,
      this.opts.maxGasPerTransaction,
      (call.payerCode ?? UNKNOWN_PAYER_CODE).signatureAllowance,
    );
    if (call.ceiling === undefined) return shaped;
    return shaped !== undefined && shaped < call.ceiling ? shaped : call.ceiling;
  }

  /**
   * Tells the phase timer how long since `since`. A timer that throws must
   * not reach the send or the receipt: the transaction is out either way,
   * and treating it as failed would send a gap filler at its nonce.
   */
  private reportPhase(phase: TransactionPhase, since: number): void {
    try {
      this.opts.onPhase?.(phase, (performance.now() - since) / 1000);
    } catch (e) {
      this.opts.log.warn({ err: String(e), phase }, "transaction phase timer failed");
    }
  }

  private track(
    lane: Lane,
    nonce: number,
    tx: { to: Hex; data: Hex; gas: bigint; value?: bigint },
    fees: Fees,
    hash: Hex,
    budgetHold: symbol,
  ): void {
    let resolve!: (r: TransactionReceipt) => void;
    const receipt = new Promise<TransactionReceipt>((r) => (resolve = r));
    const f: InFlight = {
      lane,
      nonce,
      ...tx,
      fees,
      hashes: [hash],
      receipt,
      resolve,
      timer: undefined,
      bumps: 0,
      acceptedAt: performance.now(),
      budgetHold,
    };
    this.inflight.set(hash.toLowerCase(), f);
    this.watchHash(f, hash);
    this.replacement.schedule(f);
  }

  private watchHash(f: InFlight, hash: Hex): void {
    void this.watcher.wait(hash).then((r) => this.settleInFlight(f, r));
  }

  private settleInFlight(f: InFlight, r: TransactionReceipt): void {
    // Only once per transaction, whichever of its versions was mined.
    if (f.hashes.some((h) => this.inflight.has(h.toLowerCase()))) {
      this.reportPhase("inclusion", f.acceptedAt);
    }
    if (f.timer) clearTimeout(f.timer);
    f.timer = undefined;
    for (const h of f.hashes) {
      this.inflight.delete(h.toLowerCase());
      if (h.toLowerCase() !== r.transactionHash.toLowerCase()) this.watcher.forget(h);
    }
    const fee = r.gasUsed * r.effectiveGasPrice;
    if (f.budgetHold) this.failedGas.finish(f.budgetHold, r.status === "reverted", fee);
    this.opts.onFeePaid?.(r.status, fee);
    void this.opts.journal
      .finished(r.transactionHash, r.status, r.blockNumber, fee)
      .catch((e: unknown) =>
        this.opts.log.error({ err: String(e), tx: r.transactionHash }, "could not journal receipt"),
      );
    f.resolve(r);
  }

  /**
   * The receipt of `hash` or of whichever transaction replaced it. Rejects
   * after `timeoutMs` (the transaction stays tracked and may still be mined).
   */
  async waitForReceipt(hash: Hex, timeoutMs: number): Promise<TransactionReceipt> {
    const f = this.inflight.get(hash.toLowerCase());
    // Not in flight here: it may have been mined already (a retry after
    // `settlement_pending`, or sent by another replica), and the watcher only
    // follows blocks from now on, so ask the chain first.
    const mined = f
      ? undefined
      : await this.opts.client.getTransactionReceipt({ hash }).catch(() => undefined);
    if (mined) return mined;
    const receipt = f ? f.receipt : this.watcher.wait(hash);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`transaction ${hash} not mined within ${timeoutMs} ms`)),
        timeoutMs,
      );
    });
    try {
      const r = await Promise.race([receipt, timeout]);
      const scope = currentSettlement()?.notes;
      if (scope && r.transactionHash.toLowerCase() !== hash.toLowerCase()) {
        (scope.minedReplacements ??= {})[hash.toLowerCase()] = r.transactionHash;
      }
      return r;
    } finally {
      clearTimeout(timer);
    }
  }
}
