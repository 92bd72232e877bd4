/**
 * A local Solana ledger: LiteSVM (the real Solana runtime with the SPL
 * Token, Token-2022 and Associated Token Account programs) with the parts of
 * a validator that clients notice around it:
 *
 * - slots advance on a timer; each slot has a new blockhash, and a blockhash
 *   is valid for 150 blocks as on mainnet (LiteSVM alone accepts only its
 *   latest one, so the window is kept here and LiteSVM's own check is off);
 * - a transaction that already landed, sent again, answers its signature as a
 *   node does (and is not executed twice);
 * - a landed transaction is `processed` in its slot, `confirmed` one slot
 *   later and `finalized` 32 slots later;
 * - balances change only through executed transactions (and airdrops).
 *
 * Invariant: everything it accepts was executed by the Solana runtime with
 * signature verification on; what the runtime refuses is refused.
 */
import { LiteSVM, FailedTransactionMetadata, type TransactionMetadata } from "litesvm";
import {
  address,
  getBase58Decoder,
  getCompiledTransactionMessageDecoder,
  getTransactionDecoder,
  lamports,
  type Address,
  type Transaction,
} from "@solana/kit";

/** Blocks a blockhash stays valid for, as on mainnet. */
const BLOCKHASH_VALID_BLOCKS = 150;
const FINALIZED_AFTER_SLOTS = 32n;

export interface LandedTransaction {
  signature: string;
  slot: bigint;
  err: unknown;
  fee: bigint;
  logs: string[];
  messageBytes: Uint8Array;
  signatures: string[];
}

export type SendOutcome =
  | { ok: true; signature: string; duplicate: boolean }
  | { ok: false; signature: string; error: string; code: number; logs: string[] };

/** The runtime's error as a validator names it (`SignatureFailure`, `InstructionError(0, Custom(1))`). */
function errorName(result: FailedTransactionMetadata): string {
  return (
    /err: (\w+(?:\([^{]*?\))?)(?:, meta|\s*})/.exec(result.toString())?.[1] ?? "TransactionError"
  );
}

export class SolanaLedger {
  readonly svm: LiteSVM;
  private slotNumber = 1n;
  private readonly recent: { hash: string; lastValidBlockHeight: bigint }[] = [];
  private readonly landed = new Map<string, LandedTransaction>();
  private timer: NodeJS.Timeout | undefined;

  /**
   * Answer a transaction refused before execution with its signature, as a
   * node sending with `skipPreflight` does (it is then simply never found),
   * instead of an error. Off by default.
   */
  dropRefusedSilently = false;

  constructor() {
    this.svm = new LiteSVM().withBlockhashCheck(false).withSigverify(true);
    this.svm.withTransactionHistory(0n);
    this.rememberBlockhash();
  }

  get slot(): bigint {
    return this.slotNumber;
  }

  /** Block height equals the slot here: every slot produces a block. */
  get blockHeight(): bigint {
    return this.slotNumber;
  }

  start(slotMs: number): void {
    this.timer = setInterval(() => this.advance(), slotMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** One slot: a new block, a new blockhash, older ones age out of the window. */
  advance(): void {
    this.slotNumber++;
    this.svm.warpToSlot(this.slotNumber);
    this.svm.expireBlockhash();
    this.rememberBlockhash();
    while (this.recent.length > 0 && this.recent[0]!.lastValidBlockHeight < this.blockHeight) {
      this.recent.shift();
    }
  }

  private rememberBlockhash(): void {
    this.recent.push({
      hash: this.svm.latestBlockhash(),
      lastValidBlockHeight: this.blockHeight + BigInt(BLOCKHASH_VALID_BLOCKS),
    });
  }

  latestBlockhash(): { blockhash: string; lastValidBlockHeight: bigint } {
    const last = this.recent[this.recent.length - 1]!;
    return { blockhash: last.hash, lastValidBlockHeight: last.lastValidBlockHeight };
  }

  isBlockhashValid(hash: string): boolean {
    return this.recent.some((r) => r.hash === hash);
  }

  /** Decodes wire bytes into what LiteSVM executes. Throws on garbage. */
  decode(wire: Uint8Array): { tx: Transaction; signature: string; blockhash: string } {
    const tx = getTransactionDecoder().decode(wire);
    const message = getCompiledTransactionMessageDecoder().decode(tx.messageBytes);
    const first = Object.values(tx.signatures)[0];
    const signature = first ? getBase58Decoder().decode(first) : "";
    return { tx, signature, blockhash: message.lifetimeToken };
  }

  send(wire: Uint8Array): SendOutcome {
    const { tx, signature, blockhash } = this.decode(wire);
    if (this.landed.has(signature)) return { ok: true, signature, duplicate: true };
    if (!this.isBlockhashValid(blockhash)) {
      return {
        ok: false,
        signature,
        code: -32002,
        error: "Transaction simulation failed: Blockhash not found",
        logs: [],
      };
    }
    const result = this.svm.sendTransaction(tx);
    if (result instanceof FailedTransactionMetadata) {
      const err = errorName(result);
      const meta = result.meta();
      // Refused before execution (signatures, accounts, fees): nothing lands.
      if (
        /Signature|AccountNotFound|InsufficientFundsForFee|AlreadyProcessed|Sanitize/i.test(err)
      ) {
        if (this.dropRefusedSilently) return { ok: true, signature, duplicate: false };
        return { ok: false, signature, code: -32002, error: err, logs: meta.logs() };
      }
      // Executed and failed: it lands with its error, and the fee is charged.
      this.record(tx, signature, err, meta.logs(), 5000n);
      return { ok: true, signature, duplicate: false };
    }
    this.record(tx, signature, null, result.logs(), 5000n);
    return { ok: true, signature, duplicate: false };
  }

  private record(tx: Transaction, signature: string, err: unknown, logs: string[], fee: bigint) {
    this.landed.set(signature, {
      signature,
      slot: this.slotNumber,
      err,
      fee,
      logs,
      messageBytes: new Uint8Array(tx.messageBytes),
      signatures: Object.values(tx.signatures).map((s) => (s ? getBase58Decoder().decode(s) : "")),
    });
  }

  simulate(
    wire: Uint8Array,
    sigVerify: boolean,
    replaceRecentBlockhash = false,
  ): { err: unknown; logs: string[]; unitsConsumed: bigint } {
    const { tx, blockhash } = this.decode(wire);
    // As a node: an unknown blockhash fails simulation unless the caller asked
    // for it to be replaced.
    if (!replaceRecentBlockhash && !this.isBlockhashValid(blockhash)) {
      return { err: "BlockhashNotFound", logs: [], unitsConsumed: 0n };
    }
    this.svm.withSigverify(sigVerify);
    try {
      const result = this.svm.simulateTransaction(tx);
      if (result instanceof FailedTransactionMetadata) {
        return { err: errorName(result), logs: result.meta().logs(), unitsConsumed: 0n };
      }
      const meta = result.meta();
      return { err: null, logs: meta.logs(), unitsConsumed: meta.computeUnitsConsumed() };
    } finally {
      this.svm.withSigverify(true);
    }
  }

  status(signature: string): {
    slot: bigint;
    err: unknown;
    confirmationStatus: string;
    confirmations: number | null;
  } | null {
    const t = this.landed.get(signature);
    if (!t) return null;
    const age = this.slotNumber - t.slot;
    const confirmationStatus =
      age >= FINALIZED_AFTER_SLOTS ? "finalized" : age >= 1n ? "confirmed" : "processed";
    return {
      slot: t.slot,
      err: t.err,
      confirmationStatus,
      confirmations: confirmationStatus === "finalized" ? null : Number(age),
    };
  }

  transaction(signature: string): LandedTransaction | undefined {
    return this.landed.get(signature);
  }

  airdrop(to: string, amount: bigint): string {
    const result = this.svm.airdrop(address(to), lamports(amount));
    if (!result || result instanceof FailedTransactionMetadata) {
      throw new Error(`airdrop to ${to} failed`);
    }
    return getBase58Decoder().decode((result as TransactionMetadata).signature());
  }

  account(of: Address) {
    return this.svm.getAccount(of);
  }
}
