/**
 * The facilitator's Starknet executor accounts on one network: the accounts
 * that submit `execute_from_outside_v2` and pay its fee in STRK.
 *
 * - A payment names its executor (the SNIP-9 `Caller` is bound into the
 *   payer's signature), so the settlement is sent from exactly that account;
 *   `/supported` offers the executors in rotation, and all stay accepted.
 * - An executor whose STRK balance falls below the floor leaves the
 *   rotation (log line, `x402_signer_in_rotation` metric) until it is topped up.
 * - Nonces: one executor's sends take turns in this process (nonce,
 *   signature, journal, onto the wire) and overlap after that: each is sent
 *   without waiting for the node to accept the one before, over a connection
 *   that keeps their order (rpc.ts). An executor this replica holds the
 *   lease for keeps its nonce locally, reserving one per send; one another
 *   replica holds (a payment named it here) reads the node's pre-confirmed
 *   nonce first. A nonce the node refuses is re-read once the sends ahead
 *   are answered, and the transaction re-signed, at most three times.
 * - Before a transaction leaves, its hash, nonce and signed body are
 *   journaled, so a crash can be followed up by re-sending exactly it.
 * - Each transaction holds its worst fee (its resource bounds' maximum
 *   fee) against the network's failed-fee budget (failedFeeBudget.ts) from
 *   before its nonce is taken until its outcome is known; a send the budget
 *   refuses takes no nonce and sends nothing.
 * - Private keys live only inside starknet.js `Account` signers: never logged.
 */
import { Account, RpcError, Signer, type Call, type RpcProvider, type Signature } from "starknet";
import type { Logger } from "../../lib/logger.js";
import type { SignerLeases, TransactionJournal } from "../ports.js";
import {
  FailedFeeBudgetSpentError,
  noteBudgetRefusal,
  type FailedFeeBudget,
} from "../failedFeeBudget.js";
import { RpcCode, type StarknetRpc } from "./rpc.js";
import { addressHex } from "./outsideExecution.js";

export interface ExecutorKey {
  address: string;
  privateKey: string;
}

export type ResourceBounds = NonNullable<Parameters<Account["execute"]>[1]>["resourceBounds"];

/** The most a transaction with these bounds can cost, in FRI. */
export function maxFeeOf(bounds: ResourceBounds): bigint {
  const all = bounds as unknown as Record<
    string,
    { max_amount: unknown; max_price_per_unit: unknown }
  >;
  return Object.values(all).reduce(
    (sum, b) => sum + BigInt(String(b.max_amount)) * BigInt(String(b.max_price_per_unit)),
    0n,
  );
}

interface Executor {
  address: string;
  account: Account;
  signer: HashKeepingSigner;
  healthy: boolean;
  leased: boolean;
  /** The next nonce to use, when this process knows it. */
  nonce: bigint | undefined;
  /** Turns of this account's sends (nonce, signature, journal, on the wire), one after another. */
  queue: Promise<unknown>;
  /** Sends on the wire, not yet answered: a nonce read from the node waits for them. */
  onWire: Set<Promise<unknown>>;
  inFlight: number;
}

export interface ExecutorPoolOptions {
  network: string;
  feeToken: string;
  keys: readonly ExecutorKey[];
  rpc: StarknetRpc;
  journal: TransactionJournal;
  log: Logger;
  /** Executors with less STRK (FRI) than this leave the rotation. */
  minFeeBalance: bigint;
  leases: { port: SignerLeases; holder: string; ttlMs?: number; heartbeatMs?: number };
  onHealth?: (address: string, healthy: boolean, balanceFri: bigint) => void;
  /** The network's failed-fee budget (failedFeeBudget.ts); absent: none. */
  failedFees?: FailedFeeBudget;
}

/**
 * A settlement's transaction signed before it is sent: what the simulation
 * ran, and what the send puts on the wire when the executor's nonce is
 * still the one it was signed with.
 */
export interface PreparedTransaction {
  nonce: bigint;
  tip: bigint;
  resourceBounds: ResourceBounds;
  /** The signed body, as `invokeSignedTx` sends it. */
  body: Awaited<ReturnType<Account["getSignedTransaction"]>>;
  hash: string;
}

export class ExecutorRefusal extends Error {
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * starknet.js's signer, remembering the hash of each transaction it signs.
 * A transaction's hash is what it is journaled and followed under, and
 * starknet.js computes it to sign: computing it again (Poseidon over the
 * whole body, in JavaScript) was a tenth of a settle's CPU.
 */
class HashKeepingSigner extends Signer {
  /** Hashes by the signature over them; each is taken once. */
  private readonly signed = new Map<string, string>();

  protected override async signRaw(msgHash: string): Promise<Signature> {
    const signature = await super.signRaw(msgHash);
    const [r, s] = signatureParts(signature);
    this.signed.set(`${r}:${s}`, msgHash);
    return signature;
  }

  /** The hash `signature` was made over, if this signer made it. */
  takeHash(signature: readonly string[]): string | undefined {
    const key = `${BigInt(signature[0] ?? 0)}:${BigInt(signature[1] ?? 0)}`;
    const hash = this.signed.get(key);
    this.signed.delete(key);
    return hash;
  }
}

function signatureParts(signature: Signature): [bigint, bigint] {
  if (Array.isArray(signature)) return [BigInt(signature[0]!), BigInt(signature[1]!)];
  const { r, s } = signature as { r: bigint; s: bigint };
  return [r, s];
}

export class ExecutorPool {
  private readonly executors = new Map<bigint, Executor>();
  private cursor = 0;
  private timers: NodeJS.Timeout[] = [];

  constructor(private readonly opts: ExecutorPoolOptions) {
    for (const key of opts.keys) {
      const address = addressHex(BigInt(key.address));
      const signer = new HashKeepingSigner(key.privateKey);
      this.executors.set(BigInt(key.address), {
        address,
        // Cairo 1 accounts: no class lookup to learn the calldata layout.
        account: new Account({
          provider: opts.rpc.provider,
          address,
          signer,
          cairoVersion: "1",
        }),
        signer,
        healthy: true,
        leased: false,
        nonce: undefined,
        queue: Promise.resolve(),
        onWire: new Set(),
        inFlight: 0,
      });
    }
  }

  /** Each sent transaction's hold on the failed-fee budget, until its outcome is known. */
  private readonly holds = new Map<string, symbol>();

  /**
   * A transaction ended: accepted on L2 (`reverted` counts `fee`, the FRI
   * it cost, for the hour), refused by the node, or no longer followed here
   * (its journal entry, still `sent`, keeps it counted for every replica).
   */
  finished(hash: string, reverted: boolean, fee = 0n): void {
    const hold = this.holds.get(hash);
    if (!hold) return;
    this.holds.delete(hash);
    this.opts.failedFees?.finish(hold, reverted, fee);
  }

  get provider(): RpcProvider {
    return this.opts.rpc.provider;
  }

  /** Every executor, each accepted as the `Caller` of payments signed to it. */
  addresses(): string[] {
    return [...this.executors.values()].map((e) => e.address);
  }

  has(address: bigint): boolean {
    return this.executors.has(address);
  }

  accountOf(address: bigint): Account | undefined {
    return this.executors.get(address)?.account;
  }

  /**
   * The executor's next nonce as this replica counts it (it holds the lease
   * and knows it), else undefined: what a simulation can run at without
   * asking the node, as starknet.js otherwise does before every one.
   */
  knownNonce(address: bigint): bigint | undefined {
    const e = this.executors.get(address);
    return e?.leased ? e.nonce : undefined;
  }

  /**
   * `calls` from `executor` signed with exactly these nonce, tip and
   * resource bounds: the transaction a simulation runs, and that `send`
   * sends unchanged while the executor's nonce is still `nonce`.
   */
  async sign(
    executorAddress: bigint,
    calls: Call[],
    details: { nonce: bigint; tip: bigint; resourceBounds: ResourceBounds },
  ): Promise<PreparedTransaction> {
    const e = this.executors.get(executorAddress);
    if (!e)
      throw new ExecutorRefusal("no_signer_available", "the payment's executor is not one of ours");
    const body = await e.account.getSignedTransaction(calls, details);
    const hash = e.signer.takeHash(body.signature);
    if (hash === undefined)
      throw new Error("the executor's signer kept no hash for its transaction");
    return { ...details, body, hash };
  }

  /** The executor to offer next in `/supported`: round robin among healthy ones this replica holds. */
  next(): string {
    const all = [...this.executors.values()];
    const pick = (ok: (e: Executor) => boolean) => {
      for (let i = 0; i < all.length; i++) {
        const e = all[(this.cursor + i) % all.length]!;
        if (ok(e)) {
          this.cursor = (this.cursor + i + 1) % all.length;
          return e.address;
        }
      }
      return undefined;
    };
    // With no lease (a replica still starting) or no healthy one, still name one:
    // payments to it then fail clearly rather than never being offered.
    return (
      pick((e) => e.healthy && e.leased) ??
      pick((e) => e.healthy) ??
      all[this.cursor % all.length]!.address
    );
  }

  async start(balanceEveryMs = 30_000): Promise<void> {
    await Promise.all([this.checkBalances(), this.syncLeases()]);
    this.timers.push(
      setInterval(() => void this.checkBalances(), balanceEveryMs),
      setInterval(() => void this.syncLeases(), this.opts.leases.heartbeatMs ?? 2_000),
    );
    for (const t of this.timers) t.unref();
  }

  async stop(): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    await this.opts.leases.port.releaseAll(this.opts.leases.holder).catch(() => undefined);
  }

  async checkBalances(): Promise<void> {
    await Promise.all(
      [...this.executors.values()].map(async (e) => {
        try {
          const [low, high] = await this.opts.rpc.ask((p) =>
            p.callContract({
              contractAddress: this.opts.feeToken,
              entrypoint: "balance_of",
              calldata: [e.address],
            }),
          );
          const balance = BigInt(low ?? 0) + (BigInt(high ?? 0) << 128n);
          const ok = balance >= this.opts.minFeeBalance;
          if (ok !== e.healthy) {
            this.opts.log[ok ? "info" : "warn"](
              { network: this.opts.network, executor: e.address, strkFri: balance.toString() },
              ok
                ? "executor back in rotation"
                : "executor low on STRK for fees: taken out of rotation",
            );
          }
          e.healthy = ok;
          this.opts.onHealth?.(e.address, ok, balance);
        } catch (err) {
          this.opts.log.warn(
            { err: String(err), network: this.opts.network },
            "could not read an executor's STRK balance",
          );
        }
      }),
    );
  }

  /** Renews this replica's leases; an executor newly taken re-reads its nonce. */
  async syncLeases(): Promise<void> {
    const all = [...this.executors.values()];
    try {
      const held = new Set(
        await this.opts.leases.port.sync({
          network: this.opts.network,
          addresses: all.map((e) => e.address),
          holder: this.opts.leases.holder,
          ttlMs: this.opts.leases.ttlMs ?? 6_000,
          releasable: all.filter((e) => e.leased && e.inFlight === 0).map((e) => e.address),
        }),
      );
      for (const e of all) {
        const now = held.has(e.address.toLowerCase());
        if (now && !e.leased) e.nonce = undefined;
        e.leased = now;
      }
    } catch (err) {
      this.opts.log.warn(
        { err: String(err), network: this.opts.network },
        "could not renew executor leases",
      );
      for (const e of all) e.leased = false;
    }
  }

  /**
   * Signs and submits `calls` from `executor`: journaled before it leaves.
   * Returns the transaction hash once the node accepted it, or `ambiguous`
   * with the hash when the node's answer was lost (it may be in). Throws
   * `ExecutorRefusal` when the node refused it (nothing was sent).
   * `prepared` (signed for the simulation) is sent as it is when its nonce
   * is the executor's next; otherwise the same calls, bounds and tip are
   * signed at the executor's nonce.
   */
  send(
    executorAddress: bigint,
    calls: Call[],
    prepared: PreparedTransaction,
    detail: Record<string, unknown>,
  ): Promise<{ hash: string; ambiguous: boolean }> {
    const e = this.executors.get(executorAddress);
    if (!e) {
      return Promise.reject(
        new ExecutorRefusal("no_signer_available", "the payment's executor is not one of ours"),
      );
    }
    e.inFlight++;
    return this.sendFrom(e, calls, prepared, detail).finally(() => e.inFlight--);
  }

  /**
   * One payment's transaction, sent and re-signed until the node takes it.
   * Its nonce is reserved, the transaction signed, journaled and put on the
   * executor's in-order connection in the executor's turn; the turn then
   * passes to the next send without waiting for the node's answer, so one
   * executor's sends overlap and still reach the node in nonce order.
   */
  private async sendFrom(
    e: Executor,
    calls: Call[],
    prepared: PreparedTransaction,
    detail: Record<string, unknown>,
  ): Promise<{ hash: string; ambiguous: boolean }> {
    for (let attempt = 1; ; attempt++) {
      const turn = e.queue.then(() => this.signAndDispatch(e, calls, prepared, detail));
      e.queue = turn.catch(() => undefined);
      const { txHash, answer } = await turn;
      try {
        await answer;
        return { hash: txHash, ambiguous: false };
      } catch (err) {
        if (!(err instanceof RpcError)) {
          // Sent or not, we cannot tell: the nonce may be spent. Follow the hash.
          e.nonce = undefined;
          this.opts.log.warn(
            { network: this.opts.network, executor: e.address, transaction: txHash },
            "the node's answer to a send was lost; following the transaction",
          );
          return { hash: txHash, ambiguous: true };
        }
        if (err.code === RpcCode.duplicateTx) return { hash: txHash, ambiguous: false };
        // Refused: it costs nothing.
        this.finished(txHash, false);
        // Every send after a refused one is refused too (its nonce is ahead
        // of the node's): the next turn reads the node's nonce again.
        e.nonce = undefined;
        if (err.code === RpcCode.invalidTransactionNonce && attempt < 3) continue;
        const reason =
          err.code === RpcCode.insufficientAccountBalance ||
          err.code === RpcCode.insufficientResources
            ? "no_signer_available"
            : "unexpected_settle_error";
        throw new ExecutorRefusal(
          reason,
          `the node refused the executor's transaction (${err.code}: ${err.baseError.message}); nothing was transferred`,
        );
      }
    }
  }

  /**
   * The executor's turn: the nonce (its own count while this replica holds
   * the lease; otherwise, or after a refusal, the node's once every send
   * already on the wire is answered), the signature, the journal, and the
   * send put on the wire. Returns without waiting for the node's answer.
   */
  private async signAndDispatch(
    e: Executor,
    calls: Call[],
    prepared: PreparedTransaction,
    detail: Record<string, unknown>,
  ): Promise<{ nonce: bigint; txHash: string; answer: Promise<unknown> }> {
    const { resourceBounds, tip } = prepared;
    // Held before the nonce is taken: a refusal leaves the executor's nonce as it was.
    const worstFee = maxFeeOf(resourceBounds);
    let hold: symbol | undefined;
    try {
      hold = this.opts.failedFees?.reserve(worstFee);
    } catch (err) {
      if (err instanceof FailedFeeBudgetSpentError) noteBudgetRefusal(err);
      throw err;
    }
    let txHash: string | undefined;
    let nonce: bigint;
    let signed: Awaited<ReturnType<Account["getSignedTransaction"]>>;
    try {
      if (e.leased && e.nonce !== undefined) {
        nonce = e.nonce;
      } else {
        await Promise.allSettled(e.onWire);
        nonce = BigInt(
          await this.opts.rpc.ask((p) => p.getNonceForAddress(e.address, "pre_confirmed")),
        );
      }
      if (nonce === prepared.nonce) {
        // The very transaction the simulation ran.
        signed = prepared.body;
        txHash = prepared.hash;
      } else {
        // Another send took the simulated nonce: the same calls, bounds and
        // tip at this one. Given, they spare starknet.js an estimate and a
        // scan of blocks for a tip.
        signed = await e.account.getSignedTransaction(calls, { nonce, tip, resourceBounds });
        txHash = e.signer.takeHash(signed.signature);
        if (txHash === undefined)
          throw new Error("the executor's signer kept no hash for its transaction");
      }
      await this.opts.journal.sent({
        network: this.opts.network,
        reference: txHash,
        signer: e.address,
        worstFee,
        detail: { ...detail, nonce: nonce.toString(), transaction: signed },
      });
    } catch (err) {
      // Nothing left: the hold goes back.
      if (hold) this.opts.failedFees?.finish(hold, false, 0n);
      throw err;
    }
    if (hold) {
      this.holds.set(txHash, hold);
      this.opts.failedFees?.journaled(hold);
    }
    // Reserved: the next turn signs the nonce after this one.
    e.nonce = nonce + 1n;
    // Put on the wire now, inside the turn: the in-order connection keeps
    // the order the sends are made in.
    const answer = this.opts.rpc.askInOrder((p) => p.invokeSignedTx(signed));
    e.onWire.add(answer);
    void answer.then(
      () => e.onWire.delete(answer),
      () => e.onWire.delete(answer),
    );
    return { nonce, txHash, answer };
  }
}
