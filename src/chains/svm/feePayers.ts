/**
 * The facilitator's Solana fee payers on one network, as the official
 * `@x402/svm` mechanism's signer port (`FacilitatorSvmSigner`).
 *
 * - Several fee-payer keys: `/supported` offers them in rotation among those
 *   with enough SOL, while every one of them stays accepted for payments
 *   already signed to it.
 * - A fee payer below the SOL floor leaves the rotation (log line, metric).
 * - Before a transaction leaves, its signature (the fee payer's, known once
 *   signed) and bytes are journaled, so a crash cannot lose it.
 * - A lost answer from the node is retried with the same bytes (Solana
 *   dedupes by signature) and never reported as a failure: confirmation then
 *   decides, and past the time budget the answer is `settlement_pending`.
 * - Confirmation waits for the configured commitment (`confirmed` by
 *   default), within the settle time budget.
 */
import {
  getBase58Decoder,
  getBase64Encoder,
  getTransactionDecoder,
  type Address,
  type KeyPairSigner,
  type Signature,
} from "@solana/kit";
import { TransactionOnchainFailureError, toFacilitatorSvmSigner } from "@x402/svm";
import type { FacilitatorSvmSigner } from "@x402/svm";
import type { Logger } from "../../lib/logger.js";
import type { TransactionJournal, TransactionPhase } from "../ports.js";
import {
  FailedFeeBudgetSpentError,
  noteBudgetRefusal,
  type FailedFeeBudget,
} from "../failedFeeBudget.js";
import { createSolanaRpcClient } from "./rpcTransport.js";
import { transactionFee } from "./failures.js";
import { outsideSettlementScope } from "../settlementScope.js";

export type Commitment = "confirmed" | "finalized";

export interface FeePayerOptions {
  network: string;
  rpcUrl: string;
  keys: readonly KeyPairSigner[];
  journal: TransactionJournal;
  log: Logger;
  commitment: Commitment;
  /** Bound on a confirmation wait; past it, `settlement_pending`. */
  confirmTimeoutMs: number;
  /** Fee payers with fewer lamports leave the rotation. */
  minLamports: bigint;
  onSignerHealth?: (address: string, healthy: boolean, lamports: bigint) => void;
  /** How long a settle's broadcast (journal entry and send) and its confirmation wait took. */
  onPhase?: (phase: TransactionPhase, seconds: number) => void;
  pollMs?: number;
  /** The network's failed-fee budget (failedFeeBudget.ts); absent: none. */
  failedFees?: FailedFeeBudget;
  /** What a transaction that landed cost its fee payer (lamports). */
  onFeePaid?: (status: "success" | "reverted", lamports: bigint) => void;
}

const RANK: Record<string, number> = { processed: 0, confirmed: 1, finalized: 2 };

export class SvmFeePayers {
  readonly rpc: ReturnType<typeof createSolanaRpcClient>;
  readonly signer: FacilitatorSvmSigner;
  private readonly inner = new Map<string, FacilitatorSvmSigner>();
  private readonly healthy = new Set<string>();
  private cursor = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: FeePayerOptions) {
    this.rpc = createSolanaRpcClient(opts.rpcUrl);
    for (const key of opts.keys) {
      // As a map for every network ("*"): the helper tells a lone RPC client
      // by probing it with `in`, which kit's proxy does not answer; given a
      // URL instead it would build a new client for every call, and an
      // unmatched network would fall back to a public endpoint.
      this.inner.set(key.address, toFacilitatorSvmSigner(key, { "*": this.rpc }));
      this.healthy.add(key.address);
    }
    const first = this.watched(this.inner.get(opts.keys[0]!.address)!);
    this.signer = {
      ...first,
      // Every fee payer is accepted for payments signed to it.
      getAddresses: () => opts.keys.map((k) => k.address),
      getSigner: (feePayer) => this.keyOf(feePayer),
      signTransaction: (tx, feePayer, network) =>
        this.innerOf(feePayer).signTransaction(tx, feePayer, network),
      sendTransaction: (tx) => this.timed("broadcast", this.send(tx)),
      confirmTransaction: (signature) => this.timed("inclusion", this.confirm(signature)),
    };
  }

  /** When a call to the RPC last failed for a transport reason (0: never). */
  lastTransportFailure = 0;

  /**
   * The official scheme turns an RPC error during verification into a
   * payment reason (a simulation that could not run reads as a failed one);
   * every call through the signer therefore notes transport failures, so the
   * service can tell an outage from a bad payment.
   */
  private watched(signer: FacilitatorSvmSigner): FacilitatorSvmSigner {
    const out: Record<string, unknown> = { ...signer };
    for (const [name, value] of Object.entries(signer)) {
      if (typeof value !== "function" || name === "getAddresses" || name === "getSigner") continue;
      out[name] = async (...args: unknown[]) => {
        try {
          return await (value as (...a: unknown[]) => Promise<unknown>)(...args);
        } catch (e) {
          if (isTransportFailure(e)) this.lastTransportFailure = Date.now();
          throw e;
        }
      };
    }
    return out as FacilitatorSvmSigner;
  }

  /** Reports how long `work` took once it succeeds (the settle stages' figures split further). */
  private timed<T>(phase: TransactionPhase, work: Promise<T>): Promise<T> {
    const onPhase = this.opts.onPhase;
    if (!onPhase) return work;
    const started = performance.now();
    return work.then((value) => {
      onPhase(phase, (performance.now() - started) / 1000);
      return value;
    });
  }

  /** The next fee payer to offer in /supported: round robin among those with SOL. */
  next(): Address {
    const all = this.opts.keys.map((k) => k.address);
    for (let i = 0; i < all.length; i++) {
      const candidate = all[(this.cursor + i) % all.length]!;
      if (this.healthy.has(candidate)) {
        this.cursor = (this.cursor + i + 1) % all.length;
        return candidate;
      }
    }
    // None has SOL: still name one, so payments fail clearly at simulation.
    return all[this.cursor % all.length]!;
  }

  async start(checkEveryMs = 30_000): Promise<void> {
    await this.checkBalances();
    this.timer = setInterval(() => void this.checkBalances(), checkEveryMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  async checkBalances(): Promise<void> {
    await Promise.all(
      this.opts.keys.map(async ({ address }) => {
        try {
          const { value } = await this.rpc.getBalance(address).send();
          const ok = value >= this.opts.minLamports;
          if (ok !== this.healthy.has(address)) {
            this.opts.log[ok ? "info" : "warn"](
              { network: this.opts.network, feePayer: address, lamports: value.toString() },
              ok ? "fee payer back in rotation" : "fee payer low on SOL: taken out of rotation",
            );
          }
          if (ok) this.healthy.add(address);
          else this.healthy.delete(address);
          this.opts.onSignerHealth?.(address, ok, value);
        } catch (e) {
          this.opts.log.warn(
            { err: String(e), network: this.opts.network },
            "could not read fee payer balance",
          );
        }
      }),
    );
  }

  private keyOf(feePayer: Address): KeyPairSigner {
    const key = this.opts.keys.find((k) => k.address === feePayer);
    if (!key) throw new Error(`fee payer ${feePayer} is not one of this service's`);
    return key;
  }

  private innerOf(feePayer: Address): FacilitatorSvmSigner {
    const s = this.inner.get(feePayer);
    if (!s) throw new Error(`fee payer ${feePayer} is not one of this service's`);
    return s;
  }

  /** The fee of each transaction in flight, and its hold on the failed-fee budget. */
  private readonly fees = new Map<string, { fee: bigint; hold: symbol | undefined }>();

  /**
   * Gives a transaction's hold back: landed (`reverted` counts its fee for
   * the hour), refused, or no longer followed here (its journal entry, still
   * `sent`, keeps it counted for every replica until its hour is over).
   */
  private release(signature: string, reverted: boolean): bigint | undefined {
    const known = this.fees.get(signature);
    if (!known) return undefined;
    this.fees.delete(signature);
    if (known.hold) this.opts.failedFees?.finish(known.hold, reverted, known.fee);
    return known.fee;
  }

  private async send(base64: string): Promise<string> {
    const bytes = getBase64Encoder().encode(base64);
    const tx = getTransactionDecoder().decode(bytes);
    const [feePayer, sig] = Object.entries(tx.signatures)[0]!;
    const signature = getBase58Decoder().decode(sig!);
    // Its fee is held against the failed-fee budget until its outcome is known.
    const fee = transactionFee(tx.messageBytes);
    if (!this.fees.has(signature)) {
      try {
        this.fees.set(signature, { fee, hold: this.opts.failedFees?.reserve(fee) });
      } catch (e) {
        if (e instanceof FailedFeeBudgetSpentError) noteBudgetRefusal(e);
        throw e;
      }
    }
    try {
      await this.opts.journal.sent({
        network: this.opts.network,
        reference: signature,
        signer: feePayer,
        worstFee: fee,
        detail: { transaction: base64 },
      });
    } catch (e) {
      this.release(signature, false);
      throw e;
    }
    const held = this.fees.get(signature)?.hold;
    if (held) this.opts.failedFees?.journaled(held);
    // The same bytes are the same transaction (same signature): re-sending
    // after a lost answer cannot pay twice.
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.rpc
          .sendTransaction(base64 as never, {
            encoding: "base64",
            skipPreflight: true,
            preflightCommitment: "confirmed",
          })
          .send();
      } catch (e) {
        if (!isTransportFailure(e)) {
          this.release(signature, false);
          throw e;
        }
        if (attempt >= 3) {
          // It may have reached the node: let confirmation decide.
          this.opts.log.warn(
            { err: String(e), signature },
            "the node's answer to a send was lost; following the signature",
          );
          return signature;
        }
        await new Promise((r) => setTimeout(r, 200 * attempt));
      }
    }
  }

  /**
   * Waits for `signature` to reach the configured commitment. Every
   * settlement waiting at once is followed by one poller, which asks for all
   * their statuses in one `getSignatureStatuses` call per tick (up to 256
   * signatures a call, the method's limit) instead of one call each: under
   * load that is most of the RPC calls a settle makes, on the node's and
   * this process's CPU alike.
   */
  private async confirm(signature: string): Promise<void> {
    const word = await new Promise<ChainWord>((resolve, reject) => {
      const waiter = { deadline: Date.now() + this.opts.confirmTimeoutMs, resolve, reject };
      const list = this.waiting.get(signature);
      if (list) list.push(waiter);
      else this.waiting.set(signature, [waiter]);
      // The poller serves every settle waiting on this network, so it runs in
      // none's scope: started inside the first, it would report what it
      // decides for all of them as that one settle's.
      this.polling ??= outsideSettlementScope(() => this.pollStatuses());
    });
    // Journaled by the waiting settle, in its own scope, so its outcome's
    // statement writes it; the answer leaves only once the journal holds it
    // (a write that fails fails this settle, and the reconciler reads the
    // chain again).
    await this.opts.journal.finished(signature, word.ended, word.slot, word.fee);
    if (word.failure) throw word.failure;
  }

  private readonly waiting = new Map<string, StatusWaiter[]>();
  private polling: Promise<void> | undefined;

  private async pollStatuses(): Promise<void> {
    const every = this.opts.pollMs ?? STATUS_POLL_MS;
    try {
      let tickAt = Date.now();
      while (this.waiting.size > 0) {
        // Ticks keep their cadence: the time a tick's call took comes off the
        // wait before the next one, so a slow node does not stretch every
        // settle's wait by its own latency on top of the interval.
        tickAt = Math.max(tickAt + every, Date.now());
        await new Promise((r) => setTimeout(r, tickAt - Date.now()));
        const signatures = [...this.waiting.keys()];
        for (let i = 0; i < signatures.length; i += STATUSES_PER_CALL) {
          const chunk = signatures.slice(i, i + STATUSES_PER_CALL);
          const { value } = await this.rpc
            .getSignatureStatuses(chunk as Signature[])
            .send()
            .catch(() => ({ value: chunk.map(() => null) }));
          for (const [j, signature] of chunk.entries()) this.decide(signature, value[j] ?? null);
        }
      }
    } finally {
      // In the same turn as the empty check above: a waiter added after it
      // finds no poller and starts one (a `.finally` on the promise would
      // run a turn later, and a waiter added between would wait for none).
      this.polling = undefined;
    }
  }

  /**
   * Settles the waiters of one signature once its status says how it ended,
   * or time is up. An ended signature leaves the poll at once, and each of
   * its waiters journals the chain's word in its own settle's scope: the
   * next tick does not ask about the signature again.
   */
  private decide(signature: string, status: SignatureStatus | null): void {
    const waiters = this.waiting.get(signature);
    if (!waiters) return;
    const wanted = RANK[this.opts.commitment]!;
    const ended = status?.err
      ? "reverted"
      : status && (RANK[status.confirmationStatus ?? "processed"] ?? 0) >= wanted
        ? "success"
        : undefined;
    if (status && ended) {
      this.waiting.delete(signature);
      const failure =
        ended === "reverted"
          ? new TransactionOnchainFailureError(
              `transaction ${signature} failed on-chain: ${describeChainError(status.err)}`,
            )
          : undefined;
      const fee = this.release(signature, ended === "reverted");
      if (fee !== undefined) this.opts.onFeePaid?.(ended, fee);
      for (const w of waiters) w.resolve({ ended, slot: status.slot, fee, failure });
      return;
    }
    const now = Date.now();
    if (!waiters.some((w) => now >= w.deadline)) return;
    const timedOut = new Error(
      `transaction ${signature} not ${this.opts.commitment} within ${this.opts.confirmTimeoutMs} ms`,
    );
    const still = waiters.filter((w) => {
      if (now < w.deadline) return true;
      w.reject(timedOut);
      return false;
    });
    if (still.length > 0) this.waiting.set(signature, still);
    else {
      this.waiting.delete(signature);
      this.release(signature, false);
    }
  }
}

/**
 * How often waiting signatures are asked about when the operator sets no
 * interval. A transaction is confirmed at a slot boundary (every 400 ms), and
 * a settle learns it on the next tick: half an interval later on average.
 * One call serves every waiting settlement, so asking every 100 ms costs the
 * node ten calls a second while any settle waits, however many do.
 */
const STATUS_POLL_MS = 100;

/** `getSignatureStatuses` takes at most 256 signatures a call. */
export const STATUSES_PER_CALL = 256;

interface StatusWaiter {
  deadline: number;
  resolve: (word: ChainWord) => void;
  reject: (e: unknown) => void;
}

/** How a signature ended, as the poller read it. */
interface ChainWord {
  ended: "success" | "reverted";
  slot: bigint;
  fee: bigint | undefined;
  failure: Error | undefined;
}

interface SignatureStatus {
  err: unknown;
  slot: bigint;
  confirmationStatus: string | null;
}

/**
 * A transaction's on-chain error as text. kit reads the RPC's integers as
 * BigInt (an instruction's index, a custom program error's code), which
 * `JSON.stringify` refuses to write.
 */
export function describeChainError(err: unknown): string {
  return JSON.stringify(err, (_, v: unknown) => (typeof v === "bigint" ? v.toString() : v));
}

function isTransportFailure(e: unknown): boolean {
  const text =
    e instanceof Error
      ? `${e.name} ${e.message} ${String(e.cause ?? "")} ${JSON.stringify((e as { context?: unknown }).context ?? {})}`
      : String(e);
  return /fetch failed|ECONNREFUSED|ECONNRESET|socket|timed? ?out|HTTP error \(5\d\d\)|SOLANA_ERROR__RPC__TRANSPORT_HTTP_ERROR/i.test(
    text,
  );
}
