/**
 * The facilitator's accounts on one network, and the transactions they send.
 *
 * - Nonces are handed out locally per account (a lane), so any number of
 *   concurrent settlements pipeline into the mempool instead of colliding.
 * - Every call is simulated (`eth_estimateGas`) before a nonce is taken, so a
 *   payment that would revert costs neither gas nor a nonce.
 * - Each transaction is signed locally and journaled (hash and raw bytes)
 *   before it is broadcast: after a crash it can be found or re-sent as is.
 * - A transaction not mined within `stuckAfterMs` is replaced with the same
 *   nonce and higher fees; whichever version is mined answers the waiter.
 * - An account whose gas balance falls below `minBalanceWei` leaves the
 *   rotation until it is topped up.
 */
import {
  type Chain,
  type Hex,
  type PublicClient,
  type TransactionReceipt,
  BaseError,
  HttpRequestError,
  TimeoutError,
  keccak256,
} from "viem";
import { privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import type { Logger } from "../../lib/logger.js";
import type { FeeOracle, Fees } from "./feeOracle.js";
import { createNativeTransactionSigner } from "./nativeTransactionSigner.js";
import type { SignerLeases, TransactionJournal } from "../ports.js";
import { ReceiptWatcher } from "./receiptWatcher.js";
import { currentSettlement } from "./settlementContext.js";

/** The one account a call must come from cannot send it on this replica now. */
export class SignerUnavailableError extends Error {
  constructor(network: string, address: string, why: string) {
    super(`the facilitator account ${address} on ${network} ${why}`);
    this.name = "SignerUnavailableError";
  }
}

export class NoHealthySignerError extends Error {
  constructor(network: string) {
    super(
      `no facilitator account on ${network} is usable by this replica: each is below its minimum gas balance or leased to another replica`,
    );
    this.name = "NoHealthySignerError";
  }
}

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
  balanceCheckMs?: number;
  onSignerHealth?: (address: string, healthy: boolean, balanceWei: bigint) => void;
  /**
   * Cross-replica leasing of the accounts (several replicas, one key set).
   * Without it this process uses every account.
   */
  leases?: { port: SignerLeases; holder: string; ttlMs?: number; heartbeatMs?: number };
}

interface Lane {
  account: PrivateKeyAccount;
  sign: ReturnType<typeof createNativeTransactionSigner>;
  next: number | undefined;
  init: Promise<void> | undefined;
  healthy: boolean;
  /** Whether this replica holds the account's lease (always true without leasing). */
  leased: boolean;
}

interface InFlight {
  lane: Lane;
  nonce: number;
  to: Hex;
  data: Hex;
  gas: bigint;
  fees: Fees;
  hashes: Hex[];
  receipt: Promise<TransactionReceipt>;
  resolve(r: TransactionReceipt): void;
  timer: NodeJS.Timeout | undefined;
  bumps: number;
}

const MAX_BUMPS = 5;

/**
 * The node's answer to a broadcast was lost (timeout, dropped connection):
 * the transaction may or may not be in its pool. The caller must treat the
 * settlement as pending, never as failed.
 */
export class AmbiguousBroadcastError extends Error {
  constructor(
    readonly hash: Hex,
    cause: unknown,
  ) {
    super(`transaction ${hash} was sent but the node's answer was lost`, { cause });
    this.name = "AmbiguousBroadcastError";
  }
}

function isTransportError(e: unknown): boolean {
  if (!(e instanceof BaseError)) return false;
  return !!e.walk((c) => c instanceof HttpRequestError || c instanceof TimeoutError);
}

function isAlreadyKnown(e: unknown): boolean {
  const text = e instanceof BaseError ? `${e.details} ${e.shortMessage}` : String(e);
  return /already known|already imported|known transaction/i.test(text);
}

function isNonceError(e: unknown): boolean {
  const text = e instanceof BaseError ? e.details + " " + e.shortMessage : String(e);
  return /nonce too low|nonce.*already|already known|replacement transaction underpriced|NonceTooLow/i.test(
    text,
  );
}

export class EvmSignerPool {
  readonly addresses: readonly `0x${string}`[];
  private readonly lanes: Lane[];
  private readonly watcher: ReceiptWatcher;
  /** Keyed by every hash of a transaction (original and replacements). */
  private readonly inflight = new Map<string, InFlight>();
  private cursor = 0;
  private balanceTimer: NodeJS.Timeout | undefined;
  private leaseTimer: NodeJS.Timeout | undefined;
  private leasesValidUntil = 0;

  constructor(private readonly opts: SignerPoolOptions) {
    this.lanes = opts.privateKeys.map((k) => ({
      account: privateKeyToAccount(k),
      sign: createNativeTransactionSigner(k),
      next: undefined,
      init: undefined,
      healthy: true,
      leased: !opts.leases,
    }));
    this.addresses = this.lanes.map((l) => l.account.address);
    this.watcher = new ReceiptWatcher(opts.client, opts.receiptTickMs, (e) =>
      opts.log.warn({ err: String(e), network: opts.network }, "receipt watcher: RPC error"),
    );
  }

  /** Takes this replica's share of the accounts, then starts the gas-balance check. */
  async start(): Promise<void> {
    const leases = this.opts.leases;
    if (leases) {
      // After a crash, the dead process's leases block its accounts until
      // they expire: wait for a share rather than start with none.
      const deadline = Date.now() + (leases.ttlMs ?? 6_000) + 1_000;
      await this.syncLeases();
      while (!this.lanes.some((l) => l.leased) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 500));
        await this.syncLeases();
      }
      this.leaseTimer = setInterval(() => void this.syncLeases(), leases.heartbeatMs ?? 2_000);
      this.leaseTimer.unref();
    }
    if (this.opts.minBalanceWei <= 0n) return;
    await this.checkBalances();
    const every = this.opts.balanceCheckMs ?? 30_000;
    this.balanceTimer = setInterval(() => void this.checkBalances(), every);
    this.balanceTimer.unref();
  }

  /** Renews leases and adjusts to a fair share; newly taken accounts resync their nonce. */
  async syncLeases(): Promise<void> {
    const leases = this.opts.leases;
    if (!leases) return;
    const ttlMs = leases.ttlMs ?? 6_000;
    const busy = new Set([...this.inflight.values()].map((f) => f.lane));
    try {
      const held = new Set(
        await leases.port.sync({
          network: this.opts.network,
          addresses: this.addresses,
          holder: leases.holder,
          ttlMs,
          releasable: this.lanes
            .filter((l) => l.leased && !busy.has(l))
            .map((l) => l.account.address),
        }),
      );
      this.leasesValidUntil = Date.now() + ttlMs - 1_000;
      for (const lane of this.lanes) {
        const now = held.has(lane.account.address.toLowerCase());
        // Another replica may have used this account since we last held it.
        if (now && !lane.leased) lane.next = undefined;
        lane.leased = now;
      }
    } catch (e) {
      this.opts.log.warn(
        { err: String(e), network: this.opts.network },
        "could not renew signer leases",
      );
      if (Date.now() > this.leasesValidUntil) for (const lane of this.lanes) lane.leased = false;
    }
  }

  /** Gives the leases back so other replicas take the accounts at once. */
  async release(): Promise<void> {
    if (this.leaseTimer) clearInterval(this.leaseTimer);
    const leases = this.opts.leases;
    if (!leases) return;
    for (const lane of this.lanes) lane.leased = false;
    await leases.port.releaseAll(leases.holder).catch(() => undefined);
  }

  stop(): void {
    if (this.leaseTimer) clearInterval(this.leaseTimer);
    if (this.balanceTimer) clearInterval(this.balanceTimer);
    this.watcher.stop();
    for (const f of new Set(this.inflight.values())) if (f.timer) clearTimeout(f.timer);
  }

  async checkBalances(): Promise<void> {
    await Promise.all(
      this.lanes.map(async (lane) => {
        try {
          const balance = await this.opts.client.getBalance({ address: lane.account.address });
          const healthy = balance >= this.opts.minBalanceWei;
          if (healthy !== lane.healthy) {
            this.opts.log[healthy ? "info" : "warn"](
              {
                network: this.opts.network,
                signer: lane.account.address,
                balanceWei: balance.toString(),
              },
              healthy ? "signer back in rotation" : "signer low on gas: taken out of rotation",
            );
          }
          lane.healthy = healthy;
          this.opts.onSignerHealth?.(lane.account.address, healthy, balance);
        } catch (e) {
          this.opts.log.warn(
            { err: String(e), network: this.opts.network },
            "could not read signer balance",
          );
        }
      }),
    );
  }

  /**
   * The lane of one named account. Some contracts accept a call only from the
   * facilitator the payer signed for (the upto proxy), so that account, and
   * no other, must send it.
   */
  private laneOf(address: Hex): Lane {
    const lane = this.lanes.find((l) => l.account.address.toLowerCase() === address.toLowerCase());
    if (!lane)
      throw new SignerUnavailableError(
        this.opts.network,
        address,
        "is not one of this service's accounts",
      );
    if (!lane.leased) {
      throw new SignerUnavailableError(
        this.opts.network,
        address,
        "is in use by another replica right now; retry",
      );
    }
    if (!lane.healthy) {
      throw new SignerUnavailableError(
        this.opts.network,
        address,
        "is below its minimum gas balance",
      );
    }
    return lane;
  }

  private pickLane(): Lane {
    for (let i = 0; i < this.lanes.length; i++) {
      const lane = this.lanes[(this.cursor + i) % this.lanes.length]!;
      if (lane.healthy && lane.leased) {
        this.cursor = (this.cursor + i + 1) % this.lanes.length;
        return lane;
      }
    }
    throw new NoHealthySignerError(this.opts.network);
  }

  private async syncLane(lane: Lane): Promise<void> {
    lane.init ??= this.opts.client
      .getTransactionCount({ address: lane.account.address, blockTag: "pending" })
      .then((n) => {
        lane.next = n;
      })
      .finally(() => (lane.init = undefined));
    await lane.init;
  }

  private async takeNonce(lane: Lane): Promise<number> {
    if (lane.next === undefined) await this.syncLane(lane);
    return lane.next!++;
  }

  /**
   * Simulates, signs, journals and broadcasts a call. Resolves with the
   * transaction hash once the node accepted it.
   */
  async send(call: { to: Hex; data: Hex; gas?: bigint; from?: Hex }): Promise<Hex> {
    const lane = call.from ? this.laneOf(call.from) : this.pickLane();
    // Simulation first: a call that would revert throws here, before a nonce
    // or any gas is spent. The 20% margin covers state drift until mining.
    const estimated =
      call.gas ??
      ((await this.opts.client.estimateGas({
        account: lane.account.address,
        to: call.to,
        data: call.data,
      })) *
        120n) /
        100n;
    const fees = await this.opts.fees.forNewTransaction();
    for (let attempt = 0; ; attempt++) {
      const nonce = await this.takeNonce(lane);
      try {
        const hash = await this.signAndBroadcast(
          lane,
          nonce,
          call.to,
          call.data,
          estimated,
          fees,
          undefined,
        );
        this.track({
          lane,
          nonce,
          to: call.to,
          data: call.data,
          gas: estimated,
          fees,
          hash,
        });
        return hash;
      } catch (e) {
        if (e instanceof AmbiguousBroadcastError) {
          // It may be in the pool: keep its nonce, follow it like any other
          // transaction, and let the caller report the settlement as pending.
          this.track({
            lane,
            nonce,
            to: call.to,
            data: call.data,
            gas: estimated,
            fees,
            hash: e.hash,
          });
          const scope = currentSettlement();
          if (scope) scope.ambiguousHash = e.hash;
          throw e;
        }
        if (isNonceError(e) && attempt < 2) {
          // Someone else used this account's nonce (another process, a
          // restart): resynchronise from the chain and try again.
          lane.next = undefined;
          continue;
        }
        // The nonce was taken but nothing was accepted: fill the gap so later
        // transactions from this account are not stuck behind it.
        void this.fillGap(lane, nonce, fees);
        throw e;
      }
    }
  }

  private async signAndBroadcast(
    lane: Lane,
    nonce: number,
    to: Hex,
    data: Hex,
    gas: bigint,
    fees: Fees,
    replaces: Hex | undefined,
  ): Promise<Hex> {
    const raw = lane.sign({
      chainId: this.opts.chain.id,
      type: "eip1559",
      to,
      data,
      gas,
      nonce,
      maxFeePerGas: fees.maxFeePerGas,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    });
    const hash = keccak256(raw);
    // Journaled before it leaves: after a crash the very same bytes can be
    // found on the chain or re-sent (same hash, same nonce).
    await this.opts.journal.sent({
      network: this.opts.network,
      reference: hash,
      signer: lane.account.address,
      ...(replaces ? { replaces } : {}),
      detail: { nonce, raw },
    });
    const scope = currentSettlement();
    if (scope) scope.sent = true;
    // Re-sending the same signed bytes is harmless (same hash, same nonce), so
    // a lost answer is retried; "already known" means the node has it.
    for (let attempt = 1; ; attempt++) {
      try {
        await this.opts.client.sendRawTransaction({ serializedTransaction: raw });
        break;
      } catch (e) {
        if (isAlreadyKnown(e)) break;
        if (!isTransportError(e)) throw e;
        if (attempt >= 3) throw new AmbiguousBroadcastError(hash, e);
        await new Promise((r) => setTimeout(r, 200 * attempt));
      }
    }
    return hash;
  }

  private async fillGap(lane: Lane, nonce: number, fees: Fees): Promise<void> {
    try {
      await this.signAndBroadcast(
        lane,
        nonce,
        lane.account.address,
        "0x",
        21_000n,
        fees,
        undefined,
      );
    } catch (e) {
      // The nonce may have been accepted after all, or the node is down;
      // a resync on the next nonce error repairs the lane either way.
      lane.next = undefined;
      this.opts.log.warn(
        { err: String(e), signer: lane.account.address, nonce },
        "could not fill nonce gap",
      );
    }
  }

  private track(args: {
    lane: Lane;
    nonce: number;
    to: Hex;
    data: Hex;
    gas: bigint;
    fees: Fees;
    hash: Hex;
  }): void {
    let resolve!: (r: TransactionReceipt) => void;
    const receipt = new Promise<TransactionReceipt>((r) => (resolve = r));
    const f: InFlight = {
      ...args,
      hashes: [args.hash],
      receipt,
      resolve,
      timer: undefined,
      bumps: 0,
    };
    this.inflight.set(args.hash.toLowerCase(), f);
    this.watchHash(f, args.hash);
    this.scheduleBump(f);
  }

  private watchHash(f: InFlight, hash: Hex): void {
    void this.watcher.wait(hash).then((r) => this.settleInFlight(f, r));
  }

  private settleInFlight(f: InFlight, r: TransactionReceipt): void {
    if (f.timer) clearTimeout(f.timer);
    f.timer = undefined;
    for (const h of f.hashes) {
      this.inflight.delete(h.toLowerCase());
      if (h.toLowerCase() !== r.transactionHash.toLowerCase()) this.watcher.forget(h);
    }
    void this.opts.journal
      .finished(r.transactionHash, r.status, r.blockNumber)
      .catch((e: unknown) =>
        this.opts.log.error({ err: String(e), tx: r.transactionHash }, "could not journal receipt"),
      );
    f.resolve(r);
  }

  private scheduleBump(f: InFlight): void {
    f.timer = setTimeout(() => void this.bump(f), this.opts.stuckAfterMs);
    f.timer.unref();
  }

  private async bump(f: InFlight): Promise<void> {
    f.timer = undefined;
    if (f.bumps >= MAX_BUMPS) return;
    const previous = f.hashes[f.hashes.length - 1]!;
    try {
      // It may have been mined in a block the watcher has not read yet.
      const existing = await this.opts.client
        .getTransactionReceipt({ hash: previous })
        .catch(() => undefined);
      if (existing) return this.settleInFlight(f, existing);
      const fees = this.opts.fees.bump(f.fees, await this.opts.fees.current());
      this.opts.fees.assertUnderCeiling(fees.maxFeePerGas);
      const hash = await this.signAndBroadcast(
        f.lane,
        f.nonce,
        f.to,
        f.data,
        f.gas,
        fees,
        previous,
      );
      f.fees = fees;
      f.bumps++;
      f.hashes.push(hash);
      this.inflight.set(hash.toLowerCase(), f);
      this.watchHash(f, hash);
      this.opts.log.warn(
        { network: this.opts.network, replaced: previous, by: hash, nonce: f.nonce },
        "replaced a stuck transaction with higher fees",
      );
    } catch (e) {
      if (isNonceError(e)) {
        // The nonce is used: one of our versions was mined. The watcher will
        // report it; check directly in case it was mined before we watched.
        for (const h of f.hashes) {
          const r = await this.opts.client
            .getTransactionReceipt({ hash: h })
            .catch(() => undefined);
          if (r) return this.settleInFlight(f, r);
        }
      } else {
        this.opts.log.warn(
          { err: String(e), tx: previous },
          "could not replace a stuck transaction",
        );
      }
    }
    if (
      this.inflight.has(previous.toLowerCase()) ||
      f.hashes.some((h) => this.inflight.has(h.toLowerCase()))
    ) {
      this.scheduleBump(f);
    }
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
      const scope = currentSettlement();
      if (scope && r.transactionHash.toLowerCase() !== hash.toLowerCase())
        scope.minedHash = r.transactionHash;
      return r;
    } finally {
      clearTimeout(timer);
    }
  }
}
