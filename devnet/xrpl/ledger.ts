/**
 * A local XRP Ledger that executes what it receives: the devnet's stand-in
 * for rippled, which cannot run here. It keeps account roots (XRP balances,
 * sequences, master-key flags, regular keys) and trust lines, and applies
 * `Payment` transactions in XRP or an issued currency as rippled does for the
 * cases a payment facilitator meets:
 *
 *   - signatures checked with the `xrpl` package; the signing key must be the
 *     account's enabled master key or its regular key;
 *   - sequences consumed exactly once (`tefPAST_SEQ`, `terPRE_SEQ`);
 *   - `LastLedgerSequence` enforced (`tefMAX_LEDGER`);
 *   - fees burned, reserves kept, balances moved on trust lines with their
 *     limits (`tecUNFUNDED_PAYMENT`, `tecPATH_DRY`, `tecPATH_PARTIAL`,
 *     `tecNO_DST`, `tecNO_DST_INSUF_XRP`);
 *   - `fail_hard` submissions that would only claim a fee are not applied.
 *
 * Applied transactions join the open ledger; every close (a timer, or
 * `close()`) makes it the next validated ledger, and a validated
 * transaction's metadata lists the real `AffectedNodes`, so `xrpl`'s
 * `getBalanceChanges` reads it. Not modelled: paths through order books,
 * transfer fees, tickets, multi-signing and other transaction types (they
 * are refused as malformed).
 */
import { createHash } from "node:crypto";
import BigNumber from "bignumber.js";
import { decode, decodeAccountID, deriveAddress, hashes, verifySignature } from "xrpl";
import { isApplied, type EngineResult } from "./engineResults.js";

BigNumber.config({ EXPONENTIAL_AT: [-40, 40] });

const LSF_DISABLE_MASTER = 0x00100000;
const TF_PARTIAL_PAYMENT = 0x00020000;
/** The account rippled uses as issuer of a trust line's balance. */
const ACCOUNT_ZERO = "rrrrrrrrrrrrrrrrrrrrBZbvji";

export interface AccountRoot {
  Account: string;
  Balance: bigint;
  Sequence: number;
  Flags: number;
  OwnerCount: number;
  RegularKey?: string;
  PreviousTxnID: string;
  PreviousTxnLgrSeq: number;
}

/** A trust line; `balance` is from the low account's side, as rippled stores it. */
export interface TrustLine {
  low: string;
  high: string;
  currency: string;
  balance: BigNumber;
  lowLimit: BigNumber;
  highLimit: BigNumber;
  PreviousTxnID: string;
  PreviousTxnLgrSeq: number;
}

type IssuedAmount = { currency: string; issuer: string; value: string };
type Amount = string | IssuedAmount;

export interface LedgerTx {
  hash: string;
  blob: string;
  tx: Record<string, unknown>;
  meta: Record<string, unknown>;
  /** Set once its ledger closed (validated). */
  ledgerIndex?: number;
}

export interface ClosedLedger {
  index: number;
  hash: string;
  parentHash: string;
  closeTime: number;
  transactions: string[];
}

export interface SubmitResult {
  result: EngineResult;
  hash?: string;
  tx?: Record<string, unknown>;
  applied: boolean;
  queued?: boolean;
}

const sha512Half = (...parts: string[]) =>
  createHash("sha512").update(parts.join("|")).digest("hex").slice(0, 64).toUpperCase();

/** Ripple epoch (2000-01-01) seconds, as ledgers carry close times. */
const rippleTime = (ms: number) => Math.floor(ms / 1000) - 946_684_800;

export class XrplLedger {
  readonly baseFee = 10n;
  readonly reserveBase = 1_000_000n;
  readonly reserveIncrement = 200_000n;
  readonly networkId: number;
  private readonly accounts = new Map<string, AccountRoot>();
  private readonly lines = new Map<string, TrustLine>();
  private readonly txs = new Map<string, LedgerTx>();
  private readonly ledgers: ClosedLedger[] = [];
  private open: string[] = [];
  /** Submissions held back (congestion); they expire at their LastLedgerSequence. */
  private readonly queue = new Map<string, { blob: string; lastLedger: number | undefined }>();
  private timer: NodeJS.Timeout | undefined;
  /** Told of every ledger as it closes (rippled's `ledger` stream is fed from here). */
  private readonly closeListeners = new Set<(ledger: ClosedLedger) => void>();
  /** Test control: accept submissions into the queue but never apply them. */
  withhold = false;
  /** How many recent ledgers are kept (a node with little history: lower it). */
  retainLedgers = 10_000;

  constructor(opts: { networkId?: number; genesisLedger?: number } = {}) {
    this.networkId = opts.networkId ?? 0;
    const index = opts.genesisLedger ?? 2;
    this.ledgers.push({
      index,
      hash: sha512Half("genesis", String(Date.now()), String(Math.random())),
      parentHash: "0".repeat(64),
      closeTime: rippleTime(Date.now()),
      transactions: [],
    });
  }

  get validatedIndex(): number {
    return this.ledgers[this.ledgers.length - 1]!.index;
  }
  get openIndex(): number {
    return this.validatedIndex + 1;
  }
  get validatedLedger(): ClosedLedger {
    return this.ledgers[this.ledgers.length - 1]!;
  }
  ledgerAt(index: number): ClosedLedger | undefined {
    return this.ledgers.find((l) => l.index === index);
  }

  /** Whether every ledger from `min` to `max` is validated and still kept. */
  holdsLedgers(min: number, max: number): boolean {
    // The oldest ledgers are dropped after the genesis one; what is kept
    // without a gap starts at the second entry when a gap exists.
    const [genesis, next] = this.ledgers;
    const oldest = next && next.index !== genesis!.index + 1 ? next.index : genesis!.index;
    return min <= max && min >= oldest && max <= this.validatedIndex;
  }

  start(closeMs: number): void {
    this.stop();
    this.timer = setInterval(() => this.close(), closeMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  // ---- genesis -----------------------------------------------------------

  fund(address: string, drops: bigint, opts: { flags?: number; regularKey?: string } = {}): void {
    const existing = this.accounts.get(address);
    if (existing) {
      existing.Balance += drops;
      return;
    }
    this.accounts.set(address, {
      Account: address,
      Balance: drops,
      // New accounts start at the ledger that created them, as on mainnet.
      Sequence: this.validatedIndex,
      Flags: opts.flags ?? 0,
      OwnerCount: 0,
      ...(opts.regularKey ? { RegularKey: opts.regularKey } : {}),
      PreviousTxnID: "0".repeat(64),
      PreviousTxnLgrSeq: this.validatedIndex,
    });
  }

  setAccountFlags(address: string, flags: number, regularKey?: string): void {
    const a = this.mustAccount(address);
    a.Flags = flags;
    if (regularKey === undefined) delete a.RegularKey;
    else a.RegularKey = regularKey;
  }

  /** A trust line from `holder` to `issuer` with a limit, and a balance the issuer has issued. */
  trust(holder: string, issuer: string, currency: string, limit: string, balance = "0"): void {
    this.mustAccount(holder);
    this.mustAccount(issuer);
    const [low, high] = this.order(holder, issuer);
    const held = new BigNumber(balance);
    const line: TrustLine = {
      low,
      high,
      currency,
      balance: holder === low ? held : held.negated(),
      lowLimit: holder === low ? new BigNumber(limit) : new BigNumber(0),
      highLimit: holder === high ? new BigNumber(limit) : new BigNumber(0),
      PreviousTxnID: "0".repeat(64),
      PreviousTxnLgrSeq: this.validatedIndex,
    };
    if (!this.lines.has(this.lineKey(holder, issuer, currency)))
      this.mustAccount(holder).OwnerCount++;
    this.lines.set(this.lineKey(holder, issuer, currency), line);
  }

  // ---- reads ---------------------------------------------------------------

  account(address: string): AccountRoot | undefined {
    return this.accounts.get(address);
  }

  xrpBalance(address: string): bigint {
    return this.accounts.get(address)?.Balance ?? 0n;
  }

  /** What `holder` holds of `currency` issued by `issuer` (a decimal string; "0" without a line). */
  issuedBalance(holder: string, issuer: string, currency: string): string {
    const line = this.lines.get(this.lineKey(holder, issuer, currency));
    if (!line) return "0";
    return (holder === line.low ? line.balance : line.balance.negated()).toString();
  }

  linesOf(address: string): TrustLine[] {
    return [...this.lines.values()].filter((l) => l.low === address || l.high === address);
  }

  transaction(hash: string): LedgerTx | undefined {
    return this.txs.get(hash.toUpperCase());
  }

  // ---- transactions --------------------------------------------------------

  /** rippled's `submit`: checks, then applies to the open ledger (or refuses). */
  submit(blob: string, opts: { failHard?: boolean } = {}): SubmitResult {
    let tx: Record<string, unknown>;
    try {
      tx = decode(blob) as Record<string, unknown>;
    } catch {
      return { result: "temMALFORMED", applied: false };
    }
    const hash = hashes.hashSignedTx(blob);
    const known = this.txs.get(hash);
    if (known) return { result: "tefPAST_SEQ", hash, tx, applied: false };
    let signed = false;
    try {
      signed =
        typeof tx["SigningPubKey"] === "string" &&
        tx["SigningPubKey"] !== "" &&
        verifySignature(blob);
    } catch {
      signed = false;
    }
    if (!signed) return { result: "temBAD_SIGNATURE", hash, tx, applied: false };
    if (this.withhold) {
      this.queue.set(hash, { blob, lastLedger: tx["LastLedgerSequence"] as number | undefined });
      return { result: "terQUEUED", hash, tx, applied: false, queued: true };
    }
    const outcome = this.apply(tx, {
      authorize: true,
      failHard: opts.failHard ?? false,
      dryRun: false,
      hash,
    });
    if (outcome.applied) {
      this.txs.set(hash, {
        hash,
        blob,
        tx,
        meta: { ...outcome.meta!, TransactionIndex: this.open.length },
      });
      this.open.push(hash);
    }
    return { result: outcome.result, hash, tx, applied: outcome.applied };
  }

  /** rippled's `simulate`: the same engine on the current state, changing nothing. */
  simulate(tx: Record<string, unknown>): { result: EngineResult; meta?: Record<string, unknown> } {
    const filled = { ...tx };
    if (filled["Sequence"] === undefined)
      filled["Sequence"] = this.accounts.get(String(tx["Account"]))?.Sequence ?? 0;
    if (filled["Fee"] === undefined) filled["Fee"] = this.baseFee.toString();
    const outcome = this.apply(filled, {
      authorize: false,
      failHard: false,
      dryRun: true,
      hash: "0".repeat(64),
    });
    return { result: outcome.result, ...(outcome.meta ? { meta: outcome.meta } : {}) };
  }

  /** Closes the open ledger: its transactions become validated. */
  close(): ClosedLedger {
    const parent = this.validatedLedger;
    const index = parent.index + 1;
    const hash = sha512Half(parent.hash, String(index), ...this.open);
    const ledger: ClosedLedger = {
      index,
      hash,
      parentHash: parent.hash,
      closeTime: rippleTime(Date.now()),
      transactions: this.open,
    };
    for (const h of this.open) this.txs.get(h)!.ledgerIndex = index;
    this.open = [];
    this.ledgers.push(ledger);
    // Like rippled's online_delete: older ledgers go (the genesis one stays).
    if (this.ledgers.length > this.retainLedgers + 1) {
      this.ledgers.splice(1, this.ledgers.length - this.retainLedgers - 1);
    }
    // Held transactions that can no longer be included are dropped, as
    // rippled's queue drops them.
    for (const [h, q] of this.queue) {
      if (q.lastLedger !== undefined && q.lastLedger < index + 1) this.queue.delete(h);
    }
    for (const listener of this.closeListeners) listener(ledger);
    return ledger;
  }

  /** Calls `listener` with every ledger that closes from now on; returns how to stop. */
  onClose(listener: (ledger: ClosedLedger) => void): () => void {
    this.closeListeners.add(listener);
    return () => this.closeListeners.delete(listener);
  }

  /** Lets held transactions in (test control), in the order they came. */
  release(): void {
    this.withhold = false;
    const held = [...this.queue.values()];
    this.queue.clear();
    for (const q of held) this.submit(q.blob, { failHard: true });
  }

  private apply(
    tx: Record<string, unknown>,
    opts: { authorize: boolean; failHard: boolean; dryRun: boolean; hash: string },
  ): { result: EngineResult; applied: boolean; meta?: Record<string, unknown> } {
    const refuse = (result: EngineResult) => ({ result, applied: false });
    // Preflight: the transaction on its own.
    if (tx["TransactionType"] !== "Payment") return refuse("temMALFORMED");
    const source = String(tx["Account"] ?? "");
    const destination = String(tx["Destination"] ?? "");
    const amount = tx["Amount"] as Amount | undefined;
    if (!amount || !destination) return refuse("temMALFORMED");
    if (tx["Signers"] !== undefined) return refuse("temMALFORMED");
    if (this.networkId <= 1024 && tx["NetworkID"] !== undefined) {
      return refuse("telNETWORK_ID_MAKES_TX_NON_CANONICAL");
    }
    if (source === destination) return refuse("temDST_IS_SRC");
    const flags = Number(tx["Flags"] ?? 0);
    const native = typeof amount === "string";
    if (native) {
      if (!/^\d+$/.test(amount) || BigInt(amount) <= 0n) return refuse("temBAD_AMOUNT");
      if (tx["SendMax"] !== undefined) return refuse("temBAD_SEND_XRP_MAX");
      if (flags & TF_PARTIAL_PAYMENT) return refuse("temBAD_SEND_XRP_PARTIAL");
      if (tx["Paths"] !== undefined) return refuse("temBAD_SEND_XRP_PATHS");
    } else {
      const v = new BigNumber(amount.value);
      if (!v.isFinite() || v.lte(0)) return refuse("temBAD_AMOUNT");
      // Paths and partial payments are not modelled: refuse rather than misapply.
      if (tx["Paths"] !== undefined || flags & TF_PARTIAL_PAYMENT) return refuse("temMALFORMED");
    }
    const feeRaw = String(tx["Fee"] ?? "");
    if (!/^\d+$/.test(feeRaw)) return refuse("temMALFORMED");
    const fee = BigInt(feeRaw);

    // Preclaim: against the ledger, before any fee can be claimed.
    const account = this.accounts.get(source);
    if (!account) return refuse("terNO_ACCOUNT");
    if (opts.authorize) {
      const signer = deriveAddress(String(tx["SigningPubKey"]));
      if (signer === source) {
        if (account.Flags & LSF_DISABLE_MASTER) return refuse("tefMASTER_DISABLED");
      } else if (signer !== account.RegularKey) {
        return refuse("tefBAD_AUTH");
      }
    }
    const sequence = Number(tx["Sequence"] ?? -1);
    if (sequence === 0 && tx["TicketSequence"] !== undefined) return refuse("tefNO_TICKET");
    if (sequence < account.Sequence) return refuse("tefPAST_SEQ");
    if (sequence > account.Sequence) return refuse("terPRE_SEQ");
    const lastLedger = tx["LastLedgerSequence"];
    if (typeof lastLedger === "number" && lastLedger < this.openIndex)
      return refuse("tefMAX_LEDGER");
    if (fee < this.baseFee) return refuse("telINSUF_FEE_P");
    if (fee > account.Balance) return refuse("terINSUF_FEE_B");

    // Apply: from here the fee is claimed and the sequence consumed, whatever
    // the payment itself comes to (unless fail_hard asks not to). The work is
    // done on copies, written back only when it is applied for real.
    const work = new Touched(this, opts.hash, this.openIndex);
    const from = work.account(source)!;
    from.Balance -= fee;
    from.Sequence += 1;
    const result = this.pay(from, destination, amount, tx["SendMax"] as Amount | undefined, work);
    if (result !== "tesSUCCESS" && opts.failHard) return refuse(result);
    const meta = work.meta(result, amount);
    if (opts.dryRun) return { result, applied: false, meta };
    work.commit();
    return { result, applied: isApplied(result), meta };
  }

  /**
   * Moves the amount on `work`'s copies, or changes nothing and says why it
   * cannot: every check comes before the first change.
   */
  private pay(
    from: AccountRoot,
    destination: string,
    amount: Amount,
    sendMax: Amount | undefined,
    work: Touched,
  ): EngineResult {
    if (typeof amount === "string") {
      const drops = BigInt(amount);
      const existing = work.account(destination);
      if (!existing && drops < this.reserveBase) return "tecNO_DST_INSUF_XRP";
      const reserve = this.reserveBase + this.reserveIncrement * BigInt(from.OwnerCount);
      if (from.Balance - drops < reserve) return "tecUNFUNDED_PAYMENT";
      const to = existing ?? work.create(destination);
      from.Balance -= drops;
      to.Balance += drops;
      return "tesSUCCESS";
    }
    if (!this.accounts.has(destination)) return "tecNO_DST";
    const value = new BigNumber(amount.value);
    if (sendMax !== undefined) {
      if (
        typeof sendMax === "string" ||
        sendMax.currency !== amount.currency ||
        sendMax.issuer !== amount.issuer
      ) {
        return "tecPATH_DRY";
      }
      if (new BigNumber(sendMax.value).lt(value)) return "tecPATH_PARTIAL";
    }
    const { issuer, currency } = amount;
    const source = from.Account;
    const debit = source === issuer ? undefined : work.line(source, issuer, currency);
    if (source !== issuer) {
      if (!debit) return "tecPATH_DRY";
      const held = this.heldOn(debit, source);
      if (held.lte(0)) return "tecPATH_DRY";
      if (held.lt(value)) return "tecPATH_PARTIAL";
    }
    const credit = destination === issuer ? undefined : work.line(destination, issuer, currency);
    if (destination !== issuer) {
      if (!credit) return "tecPATH_DRY";
      const limit = destination === credit.low ? credit.lowLimit : credit.highLimit;
      if (this.heldOn(credit, destination).plus(value).gt(limit)) return "tecPATH_PARTIAL";
    }
    if (debit) this.adjust(debit, source, value.negated());
    if (credit) this.adjust(credit, destination, value);
    return "tesSUCCESS";
  }

  private heldOn(line: TrustLine, holder: string): BigNumber {
    return holder === line.low ? line.balance : line.balance.negated();
  }

  private adjust(line: TrustLine, holder: string, delta: BigNumber): void {
    line.balance = holder === line.low ? line.balance.plus(delta) : line.balance.minus(delta);
  }

  // ---- internals shared with Touched ---------------------------------------

  /** @internal */ accountsMap(): Map<string, AccountRoot> {
    return this.accounts;
  }
  /** @internal */ linesMap(): Map<string, TrustLine> {
    return this.lines;
  }

  lineKey(a: string, b: string, currency: string): string {
    const [low, high] = this.order(a, b);
    return `${low}:${high}:${currency}`;
  }

  order(a: string, b: string): [string, string] {
    return Buffer.compare(Buffer.from(decodeAccountID(a)), Buffer.from(decodeAccountID(b))) < 0
      ? [a, b]
      : [b, a];
  }

  private mustAccount(address: string): AccountRoot {
    const a = this.accounts.get(address);
    if (!a) throw new Error(`no account ${address} on the ledger`);
    return a;
  }
}

/**
 * The entries one transaction touches, as copies: the payment works on them,
 * and they are written back only when it succeeds. Their before and after
 * make the metadata's `AffectedNodes`.
 */
class Touched {
  private readonly accounts = new Map<string, { before?: AccountRoot; after: AccountRoot }>();
  private readonly lines = new Map<string, { before: TrustLine; after: TrustLine }>();

  constructor(
    private readonly ledger: XrplLedger,
    private readonly hash: string,
    private readonly ledgerIndex: number,
  ) {}

  account(address: string): AccountRoot | undefined {
    const seen = this.accounts.get(address);
    if (seen) return seen.after;
    const real = this.ledger.accountsMap().get(address);
    if (!real) return undefined;
    this.accounts.set(address, { before: { ...real }, after: { ...real } });
    return this.accounts.get(address)!.after;
  }

  create(address: string): AccountRoot {
    const fresh: AccountRoot = {
      Account: address,
      Balance: 0n,
      Sequence: this.ledgerIndex,
      Flags: 0,
      OwnerCount: 0,
      PreviousTxnID: this.hash,
      PreviousTxnLgrSeq: this.ledgerIndex,
    };
    this.accounts.set(address, { after: fresh });
    return fresh;
  }

  line(holder: string, issuer: string, currency: string): TrustLine | undefined {
    const key = this.ledger.lineKey(holder, issuer, currency);
    const seen = this.lines.get(key);
    if (seen) return seen.after;
    const real = this.ledger.linesMap().get(key);
    if (!real) return undefined;
    this.lines.set(key, { before: { ...real }, after: { ...real } });
    return this.lines.get(key)!.after;
  }

  /** Writes every copy back, as entries this transaction modified last. */
  commit(): void {
    for (const [address, { after }] of this.accounts) {
      this.ledger
        .accountsMap()
        .set(address, { ...after, PreviousTxnID: this.hash, PreviousTxnLgrSeq: this.ledgerIndex });
    }
    for (const [key, { after }] of this.lines) {
      this.ledger
        .linesMap()
        .set(key, { ...after, PreviousTxnID: this.hash, PreviousTxnLgrSeq: this.ledgerIndex });
    }
  }

  /** rippled's metadata: each entry created or changed, with its previous fields. */
  meta(result: EngineResult, amount: Amount): Record<string, unknown> {
    const nodes: Record<string, unknown>[] = [];
    for (const [address, { before, after }] of this.accounts) {
      if (!before) {
        nodes.push({
          CreatedNode: {
            LedgerEntryType: "AccountRoot",
            LedgerIndex: hashes.hashAccountRoot(address),
            NewFields: {
              Account: address,
              Balance: after.Balance.toString(),
              Sequence: after.Sequence,
            },
          },
        });
        continue;
      }
      if (after.Balance === before.Balance && after.Sequence === before.Sequence) continue;
      nodes.push({
        ModifiedNode: {
          LedgerEntryType: "AccountRoot",
          LedgerIndex: hashes.hashAccountRoot(address),
          FinalFields: {
            Account: address,
            Balance: after.Balance.toString(),
            Flags: after.Flags,
            OwnerCount: after.OwnerCount,
            Sequence: after.Sequence,
            ...(after.RegularKey ? { RegularKey: after.RegularKey } : {}),
          },
          PreviousFields: {
            ...(after.Balance !== before.Balance ? { Balance: before.Balance.toString() } : {}),
            ...(after.Sequence !== before.Sequence ? { Sequence: before.Sequence } : {}),
          },
          PreviousTxnID: before.PreviousTxnID,
          PreviousTxnLgrSeq: before.PreviousTxnLgrSeq,
        },
      });
    }
    for (const { before, after } of this.lines.values()) {
      if (after.balance.eq(before.balance)) continue;
      const issued = (v: BigNumber) => ({
        currency: after.currency,
        issuer: ACCOUNT_ZERO,
        value: v.toString(),
      });
      nodes.push({
        ModifiedNode: {
          LedgerEntryType: "RippleState",
          LedgerIndex: hashes.hashTrustline(after.low, after.high, after.currency),
          FinalFields: {
            Balance: issued(after.balance),
            Flags: 0,
            HighLimit: {
              currency: after.currency,
              issuer: after.high,
              value: after.highLimit.toString(),
            },
            LowLimit: {
              currency: after.currency,
              issuer: after.low,
              value: after.lowLimit.toString(),
            },
          },
          PreviousFields: { Balance: issued(before.balance) },
          PreviousTxnID: before.PreviousTxnID,
          PreviousTxnLgrSeq: before.PreviousTxnLgrSeq,
        },
      });
    }
    return {
      AffectedNodes: nodes,
      TransactionIndex: 0,
      TransactionResult: result,
      ...(result === "tesSUCCESS" ? { delivered_amount: amount } : {}),
    };
  }
}
