/**
 * The facilitator's NEAR relayers on one network: the accounts that wrap a
 * payer's signed delegate action in an outer transaction and pay its gas.
 *
 * - Each access key is a lane with its own nonce counter; only taking a
 *   nonce is serialised, so many payments share a key at once and several
 *   keys (on one account or several) spread the load.
 * - A nonce the node refuses (another process used the key, or a later one
 *   of ours landed first) moves the counter past the chain's and the
 *   delegate is re-wrapped: the refused transaction never entered a pool,
 *   so nothing can land twice.
 * - Replicas sharing a database each hold a fair share of the keys by lease,
 *   and a key taken over re-reads its nonce.
 * - An account whose NEAR falls below the floor leaves the rotation (log
 *   line, metric) until it is topped up.
 * - Before a transaction leaves, its hash and bytes are journaled: a crash
 *   right after can follow or re-send exactly it.
 * - Each transaction holds its worst fee against the network's failed-fee
 *   budget (failedFeeBudget.ts) from before its nonce is taken until its
 *   outcome is known: the gas the relayer buys for it (the delegate's
 *   prepaid gas and the fixed cost of the receipts) at the chain's gas
 *   price, and the deposits it attaches. A send the budget refuses takes no
 *   nonce and sends nothing.
 */
import type { KeyPair, PublicKey } from "@near-js/crypto";
import { KeyPairSigner } from "@near-js/signers";
import { actionCreators, createTransaction, type SignedDelegate } from "@near-js/transactions";
import { baseEncode } from "@near-js/utils";
import type { Logger } from "../../lib/logger.js";
import { ChainUnavailableError, type SignerLeases, type TransactionJournal } from "../ports.js";
import {
  FailedFeeBudgetSpentError,
  noteBudgetRefusal,
  type FailedFeeBudget,
} from "../failedFeeBudget.js";
import { NearRpcError, type NearRpc } from "./rpc.js";
import type { DecodedDelegate } from "./signedDelegate.js";

export interface RelayerKey {
  accountId: string;
  keyPair: KeyPair;
}

export interface RelayerOptions {
  network: string;
  rpc: NearRpc;
  keys: readonly RelayerKey[];
  journal: TransactionJournal;
  log: Logger;
  /** Accounts holding less NEAR (yocto) leave the rotation. */
  minBalanceYocto: bigint;
  onSignerHealth?: (accountId: string, healthy: boolean, yocto: bigint) => void;
  leases?: { port: SignerLeases; holder: string; ttlMs?: number; heartbeatMs?: number };
  /** The network's failed-fee budget (failedFeeBudget.ts); absent: none. */
  failedFees?: FailedFeeBudget;
  /** The chain's gas price, yoctoNEAR per gas (the worst fee's price). */
  gasPrice?: () => Promise<bigint>;
  /** What a transaction that became final cost its relayer (yoctoNEAR burnt). */
  onFeePaid?: (status: "success" | "reverted", yocto: bigint) => void;
}

/**
 * Gas a relayed `ft_transfer` burns besides what the delegate prepays for
 * the call: the outer transaction's conversion, the delegate action and the
 * inner receipt's creation, sent and executed. nearcore's fees for these
 * come to about 5.5 TGas; 10 TGas bounds them with room for longer
 * arguments.
 */
const RELAY_OVERHEAD_GAS = 10n * 10n ** 12n;

interface Lane {
  accountId: string;
  publicKey: string;
  key: PublicKey;
  /** The id leases know it by. */
  leaseId: string;
  signer: KeyPairSigner;
  /** The last nonce used (undefined: read it from the chain first). */
  nonce: bigint | undefined;
  tail: Promise<unknown>;
  inFlight: number;
  leased: boolean;
}

/** A relayed payment: the outer transaction's hash and the account that signed it. */
export interface Relayed {
  hash: string;
  relayer: string;
  /** The node's answer to the send was lost: follow the hash, never call it failed. */
  ambiguous: boolean;
}

const MAX_NONCE_RETRIES = 3;

export class NearRelayers {
  private readonly lanes: Lane[];
  private readonly healthy = new Set<string>();
  private timers: NodeJS.Timeout[] = [];
  private cursor = 0;

  constructor(private readonly opts: RelayerOptions) {
    if (opts.keys.length === 0)
      throw new Error(`${opts.network}: at least one relayer key is needed`);
    this.lanes = opts.keys.map((k) => {
      const publicKey = k.keyPair.getPublicKey().toString();
      return {
        accountId: k.accountId,
        publicKey,
        key: k.keyPair.getPublicKey(),
        leaseId: `${k.accountId}/${publicKey}`,
        signer: new KeyPairSigner(k.keyPair),
        nonce: undefined,
        tail: Promise.resolve(),
        inFlight: 0,
        leased: !opts.leases,
      };
    });
    for (const l of this.lanes) this.healthy.add(l.accountId);
  }

  /** Every relayer account (each accepted; all listed in /supported). */
  accounts(): string[] {
    return [...new Set(this.lanes.map((l) => l.accountId))];
  }

  async start(checkEveryMs = 30_000): Promise<void> {
    await this.checkBalances();
    this.timers.push(setInterval(() => void this.checkBalances(), checkEveryMs));
    if (this.opts.leases) {
      await this.syncLeases();
      const deadline = Date.now() + (this.opts.leases.ttlMs ?? 6_000) + 1_000;
      // After a crash, wait for the dead holder's leases rather than start with none.
      while (!this.lanes.some((l) => l.leased) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 500));
        await this.syncLeases();
      }
      this.timers.push(
        setInterval(() => void this.syncLeases(), this.opts.leases.heartbeatMs ?? 2_000),
      );
    }
    for (const t of this.timers) t.unref();
  }

  async stop(): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    if (this.opts.leases) {
      for (const l of this.lanes) l.leased = false;
      await this.opts.leases.port.releaseAll(this.opts.leases.holder).catch(() => undefined);
    }
  }

  async checkBalances(): Promise<void> {
    await Promise.all(
      this.accounts().map(async (accountId) => {
        try {
          const view = await this.opts.rpc.query<{ amount: string; locked: string }>(
            "view_account",
            {
              account_id: accountId,
            },
          );
          const yocto = BigInt(view.amount);
          const ok = yocto >= this.opts.minBalanceYocto;
          if (ok !== this.healthy.has(accountId)) {
            this.opts.log[ok ? "info" : "warn"](
              { network: this.opts.network, relayer: accountId, yocto: yocto.toString() },
              ok ? "relayer back in rotation" : "relayer low on NEAR: taken out of rotation",
            );
          }
          if (ok) this.healthy.add(accountId);
          else this.healthy.delete(accountId);
          this.opts.onSignerHealth?.(accountId, ok, yocto);
        } catch (e) {
          this.opts.log.warn(
            { err: String(e), network: this.opts.network, relayer: accountId },
            "could not read relayer balance",
          );
        }
      }),
    );
  }

  private async syncLeases(): Promise<void> {
    const leases = this.opts.leases!;
    try {
      const held = new Set(
        await leases.port.sync({
          network: this.opts.network,
          addresses: this.lanes.map((l) => l.leaseId),
          holder: leases.holder,
          ttlMs: leases.ttlMs ?? 6_000,
          releasable: this.lanes.filter((l) => l.leased && l.inFlight === 0).map((l) => l.leaseId),
        }),
      );
      for (const lane of this.lanes) {
        const now = held.has(lane.leaseId.toLowerCase());
        // Another replica may have used this key meanwhile.
        if (now && !lane.leased) lane.nonce = undefined;
        lane.leased = now;
      }
    } catch (e) {
      this.opts.log.warn(
        { err: String(e), network: this.opts.network },
        "could not renew relayer leases",
      );
    }
  }

  /** The lane for the next payment: leased, on a funded account, least busy. */
  private pick(): Lane {
    const usable = this.lanes.filter((l) => l.leased);
    if (usable.length === 0) {
      throw new ChainUnavailableError(
        this.opts.network,
        "no relayer key is available to this replica right now",
      );
    }
    const funded = usable.filter((l) => this.healthy.has(l.accountId));
    const pool = funded.length > 0 ? funded : usable;
    const start = this.cursor++ % pool.length;
    let best = pool[start]!;
    for (let i = 1; i < pool.length; i++) {
      const l = pool[(start + i) % pool.length]!;
      if (l.inFlight < best.inFlight) best = l;
    }
    return best;
  }

  /**
   * Wraps the payer's signed delegate in a transaction from one of our
   * relayers to the payer's account, journals it, and hands it to the node.
   * Resolves once the node has accepted it into its pool (or the answer was
   * lost: `ambiguous`). The outcome is followed separately.
   */
  async relay(
    delegate: DecodedDelegate,
    blockHash: Uint8Array,
    detail: Record<string, unknown>,
  ): Promise<Relayed> {
    const lane = this.pick();
    lane.inFlight++;
    try {
      let replaces: string | undefined;
      const worst = await this.worstFee(delegate);
      for (let attempt = 1; ; attempt++) {
        const sent = await this.sendOnce(lane, delegate, blockHash, detail, replaces, worst);
        if (sent.kind === "sent") return sent.relayed;
        replaces = sent.hash;
        if (attempt >= MAX_NONCE_RETRIES) {
          throw new ChainUnavailableError(
            this.opts.network,
            `relayer ${lane.accountId} could not get a nonce accepted after ${attempt} attempts`,
          );
        }
      }
    } finally {
      lane.inFlight--;
    }
  }

  /** What relaying `delegate` costs at most: the gas bought at the chain's price, and the deposits. */
  private async worstFee(delegate: DecodedDelegate): Promise<bigint> {
    const price = this.opts.gasPrice ? await this.opts.gasPrice() : 0n;
    let gas = RELAY_OVERHEAD_GAS;
    let deposits = 0n;
    for (const a of delegate.delegateAction.actions) {
      if (a.functionCall) {
        gas += BigInt(a.functionCall.gas);
        deposits += BigInt(a.functionCall.deposit);
      } else if (a.transfer) {
        deposits += BigInt(a.transfer.deposit);
      }
    }
    return gas * price + deposits;
  }

  /** Each transaction's worst fee and its hold on the failed-fee budget, until its outcome. */
  private readonly holds = new Map<string, symbol>();

  /** Holds `worst` on the budget; a refusal is noted for the settle's answer (503, nothing sent). */
  private reserve(worst: bigint): symbol | undefined {
    try {
      return this.opts.failedFees?.reserve(worst);
    } catch (e) {
      if (e instanceof FailedFeeBudgetSpentError) noteBudgetRefusal(e);
      throw e;
    }
  }

  /**
   * A relayed transaction ended: final (`reverted` counts `fee`, the
   * yoctoNEAR it burnt, for the hour), or no longer followed here (its
   * journal entry, still `sent`, keeps it counted for every replica).
   */
  finished(hash: string, outcome: "success" | "reverted" | "unfollowed", fee = 0n): void {
    const hold = this.holds.get(hash);
    if (outcome !== "unfollowed") this.opts.onFeePaid?.(outcome, fee);
    if (!hold) return;
    this.holds.delete(hash);
    this.opts.failedFees?.finish(hold, outcome === "reverted", fee);
  }

  /**
   * The lane's next nonce. Only this step is serialised: signing, the journal
   * and the send run concurrently, so a lane is not held for a round trip to
   * the node. NEAR accepts gaps and orders a key's pooled transactions by
   * nonce, so one that reaches the node after a later one still lands (and
   * one refused as too low is re-wrapped above, never re-sent).
   */
  private takeNonce(lane: Lane): Promise<bigint> {
    const taken = lane.tail.then(async () => {
      if (lane.nonce === undefined) {
        const key = await this.opts.rpc.call<{ nonce: number | string }>("query", {
          request_type: "view_access_key",
          finality: "optimistic",
          account_id: lane.accountId,
          public_key: lane.publicKey,
        });
        lane.nonce = BigInt(key.nonce);
      }
      lane.nonce += 1n;
      return lane.nonce;
    });
    lane.tail = taken.catch(() => undefined);
    return taken;
  }

  private async sendOnce(
    lane: Lane,
    delegate: DecodedDelegate,
    blockHash: Uint8Array,
    detail: Record<string, unknown>,
    replaces: string | undefined,
    worst: bigint,
  ): Promise<{ kind: "sent"; relayed: Relayed } | { kind: "nonce"; hash: string }> {
    // Held before a nonce is taken: a refusal leaves the lane as it was.
    const hold = this.reserve(worst);
    let nonce: bigint;
    try {
      nonce = await this.takeNonce(lane);
    } catch (e) {
      if (hold) this.opts.failedFees?.finish(hold, false, 0n);
      throw e;
    }
    const action = actionCreators.signedDelegate({
      delegateAction: delegate.delegateAction,
      signature: delegate.signature,
    } as unknown as SignedDelegate);
    const tx = createTransaction(
      lane.accountId,
      lane.key,
      delegate.senderId,
      nonce,
      [action],
      blockHash,
    );
    const [hashBytes, signed] = await lane.signer.signTransaction(tx);
    const hash = baseEncode(hashBytes);
    const base64 = Buffer.from(signed.encode()).toString("base64");
    if (hold) this.holds.set(hash, hold);
    try {
      await this.opts.journal.sent({
        network: this.opts.network,
        reference: hash,
        signer: lane.accountId,
        ...(replaces ? { replaces } : {}),
        worstFee: worst,
        detail: { ...detail, signedTransaction: base64, relayer: lane.accountId },
      });
    } catch (e) {
      this.finished(hash, "unfollowed");
      throw e;
    }
    if (hold) this.opts.failedFees?.journaled(hold);
    try {
      await this.opts.rpc.call("send_tx", { signed_tx_base64: base64, wait_until: "NONE" });
      return { kind: "sent", relayed: { hash, relayer: lane.accountId, ambiguous: false } };
    } catch (e) {
      if (e instanceof NearRpcError && e.causeName === "INVALID_TRANSACTION") {
        if (e.names("InvalidNonce") || e.names("NonceTooLarge")) {
          // Never step back below a nonce already handed out (it may be in
          // a pool): move past what the chain holds, or re-read if it did not say.
          const chain = /"ak_nonce":"?(\d+)/.exec(JSON.stringify(e.info))?.[1];
          if (chain === undefined) lane.nonce = undefined;
          else if (lane.nonce === undefined || BigInt(chain) > lane.nonce)
            lane.nonce = BigInt(chain);
          this.opts.log.warn(
            { network: this.opts.network, relayer: lane.accountId, tx: hash },
            "relayer nonce was taken elsewhere: moving past it and wrapping again",
          );
          this.finished(hash, "unfollowed");
          return { kind: "nonce", hash };
        }
        // Refused: it never entered a pool and costs nothing.
        this.finished(hash, "unfollowed");
        if (e.names("NotEnoughBalance")) {
          this.healthy.delete(lane.accountId);
          throw new ChainUnavailableError(
            this.opts.network,
            `relayer ${lane.accountId} cannot pay for the transaction: top it up`,
            { cause: e },
          );
        }
        // Our own transaction was refused for a reason of ours (key, chain, expiry of the block hash).
        lane.nonce = undefined;
        throw new ChainUnavailableError(
          this.opts.network,
          `the node refused the relayer's transaction: ${e.message}`,
          { cause: e },
        );
      }
      if (e instanceof ChainUnavailableError) {
        // It may have reached the node: the same bytes are the same transaction, so follow the hash.
        this.opts.log.warn(
          { network: this.opts.network, tx: hash },
          "the node's answer to a send was lost; following the transaction",
        );
        return { kind: "sent", relayed: { hash, relayer: lane.accountId, ambiguous: true } };
      }
      this.finished(hash, "unfollowed");
      throw e;
    }
  }
}
