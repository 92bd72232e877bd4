/**
 * A local NEAR chain that executes for real, for the devnet and the tests
 * (no NEAR node runs here). It keeps accounts, access keys with nonces and
 * NEAR balances, runs the NEP-141 USDC contract, produces a block on a
 * timer, and applies transactions the way nearcore does:
 *
 * - On submission and again at inclusion, a transaction is checked as the
 *   runtime checks it: the signer's access key, the ed25519/secp256k1
 *   signature over the SHA-256 of its Borsh bytes, the nonce above the
 *   key's and below the block-height bound, a recent block hash, and the
 *   signer's balance for gas and deposits. What fails at inclusion is
 *   dropped, as a chunk producer drops it: it never gets an outcome.
 * - An NEP-366 delegate action is checked when its receipt runs: the
 *   signature over the NEP-461-prefixed hash, the sender matching the
 *   outer receiver, the expiry height, the sender's access key and nonce
 *   (which it then advances). Its inner actions run as a new receipt from
 *   the sender, so a failing `ft_transfer` fails that receipt while the
 *   outer outcome stays a success, exactly the case relayers must check.
 * - The relayer (the outer signer) pays the gas and the attached deposits;
 *   unused gas goes back to it.
 *
 * Finality: a block is final two blocks later (doomslug's usual lag).
 */
import { createHash, randomBytes } from "node:crypto";
import { PublicKey } from "@near-js/crypto";
import {
  decodeSignedTransaction,
  encodeDelegateAction,
  encodeTransaction,
  type Action,
  type DelegateAction,
  type SignedTransaction,
} from "@near-js/transactions";
import { baseDecode, baseEncode } from "@near-js/utils";
import { verifyEd25519 } from "../../src/lib/ed25519.js";
import type { FungibleToken } from "./fungibleToken.js";
import { ContractPanic } from "./fungibleToken.js";

const GAS_PRICE = 100_000_000n; // yoctoNEAR per gas, NEAR's floor
const TX_CONVERSION_GAS = 300_000_000_000n;
const ACTION_RECEIPT_GAS = 200_000_000_000n;
/** What running `ft_transfer` burns; less prepaid gas than this runs out. */
const FUNCTION_CALL_GAS = 2_500_000_000_000n;
const MAX_PREPAID_GAS = 300_000_000_000_000n;
/** Blocks a transaction's block hash stays usable (mainnet: 86,400). */
const VALIDITY_PERIOD = 86_400;
const FINALITY_LAG = 2;
const EMPTY_HASH = "11111111111111111111111111111111";

export type Permission =
  | "FullAccess"
  | { FunctionCall: { allowance: string | null; receiver_id: string; method_names: string[] } };

export interface AccessKeyState {
  nonce: bigint;
  permission: Permission;
}

export interface AccountState {
  amount: bigint;
  keys: Map<string, AccessKeyState>;
}

export interface Block {
  height: number;
  hash: string;
  prevHash: string;
  timestampNs: bigint;
  transactions: string[];
}

export type ExecutionStatus =
  { SuccessValue: string } | { SuccessReceiptId: string } | { Failure: Record<string, unknown> };

export interface OutcomeWithId {
  id: string;
  block_hash: string;
  proof: never[];
  outcome: {
    logs: string[];
    receipt_ids: string[];
    gas_burnt: number;
    tokens_burnt: string;
    executor_id: string;
    status: ExecutionStatus;
    metadata: { version: number; gas_profile: never[] };
  };
}

export interface TxRecord {
  hash: string;
  signed: SignedTransaction;
  base64: string;
  height?: number;
  blockHash?: string;
  transactionOutcome?: OutcomeWithId;
  receiptsOutcome?: OutcomeWithId[];
  status?: ExecutionStatus;
}

/** A refusal the RPC reports as nearcore does (`INVALID_TRANSACTION` and its kind). */
export class InvalidTransaction extends Error {
  constructor(readonly kind: Record<string, unknown> | string) {
    super(`invalid transaction: ${JSON.stringify(kind)}`);
    this.name = "InvalidTransaction";
  }
}

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest();
const json = (v: unknown) =>
  JSON.parse(JSON.stringify(v, (_k, x) => (typeof x === "bigint" ? x.toString() : x)));

/** Borsh decodes fixed arrays as plain arrays; the crypto wants bytes. */
export function keyOf(pk: unknown): PublicKey {
  const raw = pk as {
    ed25519Key?: { data: ArrayLike<number> };
    secp256k1Key?: { data: ArrayLike<number> };
  };
  if (raw.ed25519Key)
    return new PublicKey({ keyType: 0, data: Uint8Array.from(raw.ed25519Key.data) });
  if (raw.secp256k1Key)
    return new PublicKey({ keyType: 1, data: Uint8Array.from(raw.secp256k1Key.data) });
  throw new Error("unknown key type");
}

function signatureOf(sig: unknown): { keyType: number; data: Uint8Array } {
  const raw = sig as {
    ed25519Signature?: { data: ArrayLike<number> };
    secp256k1Signature?: { data: ArrayLike<number> };
  };
  if (raw.ed25519Signature) return { keyType: 0, data: Uint8Array.from(raw.ed25519Signature.data) };
  if (raw.secp256k1Signature)
    return { keyType: 1, data: Uint8Array.from(raw.secp256k1Signature.data) };
  throw new Error("unknown signature type");
}

function verifies(pk: PublicKey, message: Uint8Array, sig: unknown): boolean {
  try {
    const s = signatureOf(sig);
    if (s.keyType !== pk.keyType) return false;
    // Ed25519 through OpenSSL: the library's pure-JS curve would make the chain the bottleneck.
    return pk.keyType === 0 ? verifyEd25519(pk.data, message, s.data) : pk.verify(message, s.data);
  } catch {
    return false;
  }
}

function isImplicit(accountId: string): boolean {
  return /^[0-9a-f]{64}$/.test(accountId);
}

export class NearLedger {
  readonly chainId = "mainnet";
  private readonly accounts = new Map<string, AccountState>();
  private readonly contracts = new Map<string, FungibleToken>();
  private readonly blocks: Block[] = [];
  private readonly byHash = new Map<string, Block>();
  private readonly txs = new Map<string, TxRecord>();
  private pool: TxRecord[] = [];
  private held: TxRecord[] = [];
  private holding = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly waiters = new Set<() => void>();
  private receiptCounter = 0;
  private genesis = "";

  constructor(startHeight = 1_000) {
    this.produce(startHeight);
  }

  // ---- setup ------------------------------------------------------------

  createAccount(accountId: string, amount: bigint, publicKey?: string): void {
    const keys = new Map<string, AccessKeyState>();
    if (publicKey)
      keys.set(PublicKey.from(publicKey).toString(), {
        nonce: this.nonceBase(),
        permission: "FullAccess",
      });
    this.accounts.set(accountId, { amount, keys });
  }

  addKey(accountId: string, publicKey: string, permission: Permission = "FullAccess"): void {
    const a = this.mustAccount(accountId);
    a.keys.set(PublicKey.from(publicKey).toString(), { nonce: this.nonceBase(), permission });
  }

  deployToken(token: FungibleToken): void {
    if (!this.accounts.has(token.accountId)) this.createAccount(token.accountId, 10n ** 24n);
    this.contracts.set(token.accountId, token);
  }

  token(accountId: string): FungibleToken | undefined {
    return this.contracts.get(accountId);
  }

  // ---- reads --------------------------------------------------------------

  /** The first block's hash: what names this chain. */
  get genesisHash(): string {
    return this.genesis;
  }

  get head(): Block {
    return this.blocks[this.blocks.length - 1]!;
  }

  get final(): Block {
    return this.blocks[Math.max(0, this.blocks.length - 1 - FINALITY_LAG)]!;
  }

  blockAt(ref: { height?: number; hash?: string }): Block | undefined {
    if (ref.hash) return this.byHash.get(ref.hash);
    return this.blocks.find((b) => b.height === ref.height);
  }

  account(accountId: string): AccountState | undefined {
    return this.accounts.get(accountId);
  }

  hasContract(accountId: string): boolean {
    return this.contracts.has(accountId);
  }

  balance(accountId: string): bigint {
    return this.accounts.get(accountId)?.amount ?? 0n;
  }

  accessKey(accountId: string, publicKey: string): AccessKeyState | undefined {
    try {
      return this.accounts.get(accountId)?.keys.get(PublicKey.from(publicKey).toString());
    } catch {
      return undefined;
    }
  }

  transaction(hash: string): TxRecord | undefined {
    return this.txs.get(hash);
  }

  /** A view call: runs the contract method without changing anything. */
  view(contractId: string, method: string, args: Uint8Array) {
    const contract = this.contracts.get(contractId);
    if (!contract) return { noCode: true as const };
    return { result: contract.call(method, args, { predecessor: "", deposit: 0n, view: true }) };
  }

  /** Where a submitted transaction stands (undefined: this node does not know it). */
  stage(hash: string): "NONE" | "EXECUTED_OPTIMISTIC" | "FINAL" | undefined {
    const r = this.txs.get(hash);
    if (!r || r.height === undefined) return undefined;
    return r.height <= this.final.height ? "FINAL" : "EXECUTED_OPTIMISTIC";
  }

  // ---- controls for tests -------------------------------------------------

  /** Keep new transactions out of blocks (a congested or partitioned node) until `release`. */
  withhold(): void {
    this.holding = true;
  }

  /** Transactions accepted and not in a block yet (held ones included). */
  get waiting(): number {
    return this.pool.length + this.held.length;
  }

  release(): void {
    this.holding = false;
    this.pool.push(...this.held);
    this.held = [];
  }

  start(blockMs: number): void {
    this.timer = setInterval(() => this.produce(), blockMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** Resolves after the next block (for waits that follow the chain). */
  nextBlock(): Promise<void> {
    return new Promise((resolve) => this.waiters.add(resolve));
  }

  // ---- transactions ---------------------------------------------------------

  /**
   * Accepts a signed transaction into the pool after the checks nearcore
   * makes on submission; the same bytes again are the same transaction.
   */
  submit(base64: string): string {
    let signed: SignedTransaction;
    try {
      signed = decodeSignedTransaction(Buffer.from(base64, "base64"));
    } catch {
      throw new InvalidTransaction("CostOverflow");
    }
    const hash = baseEncode(sha256(encodeTransaction(signed.transaction)));
    if (this.txs.has(hash)) return hash;
    this.validate(signed, hash);
    const record: TxRecord = { hash, signed, base64 };
    this.txs.set(hash, record);
    (this.holding ? this.held : this.pool).push(record);
    return hash;
  }

  /** Drops a submitted transaction that is not in a block yet (a node losing its pool). */
  forget(hash: string): void {
    this.pool = this.pool.filter((r) => r.hash !== hash);
    this.held = this.held.filter((r) => r.hash !== hash);
    const r = this.txs.get(hash);
    if (r && r.height === undefined) this.txs.delete(hash);
  }

  private validate(signed: SignedTransaction, hash: string): void {
    const tx = signed.transaction;
    const signer = this.accounts.get(tx.signerId);
    if (!signer) throw new InvalidTransaction({ SignerDoesNotExist: { signer_id: tx.signerId } });
    const pk = keyOf(tx.publicKey);
    const key = signer.keys.get(pk.toString());
    if (!key) {
      throw new InvalidTransaction({
        InvalidAccessKeyError: {
          AccessKeyNotFound: { account_id: tx.signerId, public_key: pk.toString() },
        },
      });
    }
    if (!verifies(pk, baseDecode(hash), signed.signature))
      throw new InvalidTransaction("InvalidSignature");
    const block = this.byHash.get(baseEncode(Uint8Array.from(tx.blockHash)));
    if (!block) throw new InvalidTransaction("InvalidChain");
    if (this.head.height - block.height > VALIDITY_PERIOD) throw new InvalidTransaction("Expired");
    if (tx.nonce <= key.nonce) {
      throw new InvalidTransaction({
        InvalidNonce: { tx_nonce: Number(tx.nonce), ak_nonce: Number(key.nonce) },
      });
    }
    // nearcore bounds the nonce by the height of the block it lands in.
    const upper = BigInt(this.head.height) * 1_000_000n;
    if (tx.nonce >= upper) {
      throw new InvalidTransaction({
        NonceTooLarge: { tx_nonce: Number(tx.nonce), upper_bound: Number(upper) },
      });
    }
    if (key.permission !== "FullAccess") {
      const fc = key.permission.FunctionCall;
      const ok =
        tx.receiverId === fc.receiver_id &&
        tx.actions.every(
          (a) =>
            a.functionCall &&
            a.functionCall.deposit === 0n &&
            (fc.method_names.length === 0 || fc.method_names.includes(a.functionCall.methodName)),
        );
      if (!ok) throw new InvalidTransaction({ InvalidAccessKeyError: "RequiresFullAccess" });
    }
    const cost = this.costOf(tx.actions);
    if (signer.amount < cost) {
      throw new InvalidTransaction({
        NotEnoughBalance: {
          signer_id: tx.signerId,
          balance: signer.amount.toString(),
          cost: cost.toString(),
        },
      });
    }
  }

  /** Gas at the gas price, prepaid gas included, plus every deposit attached (inner ones too). */
  private costOf(actions: readonly Action[]): bigint {
    let gas = TX_CONVERSION_GAS;
    let deposits = 0n;
    const walk = (list: readonly Action[]) => {
      for (const a of list) {
        gas += ACTION_RECEIPT_GAS;
        if (a.functionCall) {
          gas += BigInt(a.functionCall.gas);
          deposits += BigInt(a.functionCall.deposit);
        } else if (a.transfer) {
          deposits += BigInt(a.transfer.deposit);
        } else if (a.signedDelegate) {
          walk(a.signedDelegate.delegateAction.actions);
        }
      }
    };
    walk(actions);
    return gas * GAS_PRICE + deposits;
  }

  /** Closes a block: includes what the pool holds, in nonce order per key, and runs it. */
  produce(height?: number): Block {
    const prev = this.blocks[this.blocks.length - 1];
    const h = height ?? prev!.height + 1;
    const block: Block = {
      height: h,
      prevHash: prev?.hash ?? EMPTY_HASH,
      // The first block is salted: a devnet started afresh is another chain.
      hash: baseEncode(
        sha256(
          Buffer.from(`near devnet block ${h} ${prev?.hash ?? randomBytes(16).toString("hex")}`),
        ),
      ),
      timestampNs: BigInt(Date.now()) * 1_000_000n,
      transactions: [],
    };
    this.blocks.push(block);
    this.byHash.set(block.hash, block);
    this.genesis ||= block.hash;
    if (this.blocks.length > VALIDITY_PERIOD + 10) this.byHash.delete(this.blocks.shift()!.hash);

    const batch = this.pool.sort((a, b) => {
      const ka = `${a.signed.transaction.signerId} ${keyOf(a.signed.transaction.publicKey).toString()}`;
      const kb = `${b.signed.transaction.signerId} ${keyOf(b.signed.transaction.publicKey).toString()}`;
      if (ka !== kb) return ka < kb ? -1 : 1;
      return a.signed.transaction.nonce < b.signed.transaction.nonce ? -1 : 1;
    });
    this.pool = [];
    for (const record of batch) {
      try {
        this.validate(record.signed, record.hash);
      } catch {
        // A chunk producer drops it: it never gets an outcome.
        this.txs.delete(record.hash);
        continue;
      }
      this.apply(record, block);
    }
    for (const w of [...this.waiters]) {
      this.waiters.delete(w);
      w();
    }
    return block;
  }

  private nonceBase(): bigint {
    // nearcore starts a new key's nonce at (block height - 1) * 1e6, so a
    // nonce can never repeat one the key had before it was deleted.
    return BigInt(this.blocks.length ? this.head.height - 1 : 0) * 1_000_000n;
  }

  private nextReceiptId(): string {
    return baseEncode(sha256(Buffer.from(`near devnet receipt ${++this.receiptCounter}`)));
  }

  private outcome(
    id: string,
    block: Block,
    executor: string,
    status: ExecutionStatus,
    gas: bigint,
    extra: { logs?: string[]; receipts?: string[] } = {},
  ): OutcomeWithId {
    return {
      id,
      block_hash: block.hash,
      proof: [],
      outcome: {
        logs: extra.logs ?? [],
        receipt_ids: extra.receipts ?? [],
        gas_burnt: Number(gas),
        tokens_burnt: (gas * GAS_PRICE).toString(),
        executor_id: executor,
        status,
        metadata: { version: 3, gas_profile: [] },
      },
    };
  }

  private apply(record: TxRecord, block: Block): void {
    const tx = record.signed.transaction;
    const signer = this.accounts.get(tx.signerId)!;
    const key = signer.keys.get(keyOf(tx.publicKey).toString())!;
    key.nonce = tx.nonce;
    const cost = this.costOf(tx.actions);
    signer.amount -= cost;
    record.height = block.height;
    record.blockHash = block.hash;
    block.transactions.push(record.hash);

    const receipts: OutcomeWithId[] = [];
    const firstReceipt = this.nextReceiptId();
    record.transactionOutcome = this.outcome(
      record.hash,
      block,
      tx.signerId,
      { SuccessReceiptId: firstReceipt },
      TX_CONVERSION_GAS,
      { receipts: [firstReceipt] },
    );
    // Gas bought but not burnt goes back to the signer.
    let refundGas = cost / GAS_PRICE - TX_CONVERSION_GAS;
    const run = (
      id: string,
      predecessor: string,
      receiver: string,
      actions: readonly Action[],
    ): ExecutionStatus => {
      let burnt = 0n;
      const logs: string[] = [];
      const children: string[] = [];
      let status: ExecutionStatus = { SuccessValue: "" };
      let deposited = 0n;
      for (const [index, action] of actions.entries()) {
        burnt += ACTION_RECEIPT_GAS;
        const fail = (kind: unknown) => ({ Failure: { ActionError: { index, kind } } });
        if (action.transfer) {
          const amount = BigInt(action.transfer.deposit);
          const to = this.accounts.get(receiver);
          if (!to && !isImplicit(receiver)) {
            status = fail({ AccountDoesNotExist: { account_id: receiver } });
            break;
          }
          if (!to) this.accounts.set(receiver, { amount: 0n, keys: new Map() });
          this.accounts.get(receiver)!.amount += amount;
          deposited += amount;
        } else if (action.functionCall) {
          const fc = action.functionCall;
          const contract = this.contracts.get(receiver);
          if (!contract) {
            status = fail({
              FunctionCallError: {
                CompilationError: { CodeDoesNotExist: { account_id: receiver } },
              },
            });
            break;
          }
          if (BigInt(fc.gas) < FUNCTION_CALL_GAS) {
            burnt += BigInt(fc.gas);
            status = fail({ FunctionCallError: { ExecutionError: "Exceeded the prepaid gas." } });
            break;
          }
          burnt += FUNCTION_CALL_GAS;
          try {
            const result = contract.call(fc.methodName, Uint8Array.from(fc.args), {
              predecessor,
              deposit: BigInt(fc.deposit),
              view: false,
            });
            logs.push(...result.logs);
            const kept = BigInt(fc.deposit) - (result.refund ?? 0n);
            this.accounts.get(receiver)!.amount += kept;
            deposited += kept;
            if (result.refund) this.credit(predecessor, result.refund);
            status = {
              SuccessValue:
                result.value === undefined
                  ? ""
                  : Buffer.from(JSON.stringify(result.value)).toString("base64"),
            };
          } catch (e) {
            const message = e instanceof ContractPanic ? e.message : String(e);
            status = fail({
              FunctionCallError: { ExecutionError: `Smart contract panicked: ${message}` },
            });
            break;
          }
        } else if (action.signedDelegate) {
          const outcome = this.delegate(action.signedDelegate, receiver);
          if ("error" in outcome) {
            status = fail(outcome.error);
            break;
          }
          const child = this.nextReceiptId();
          children.push(child);
          status = { SuccessValue: "" };
          // Runs after this receipt is recorded, below.
          pending.push({
            id: child,
            predecessor: receiver,
            receiver: outcome.receiverId,
            actions: outcome.actions,
          });
        } else {
          status = fail({ UnsupportedOnDevnet: { action: Object.keys(json(action))[0] } });
          break;
        }
      }
      if ("Failure" in status) {
        // Deposits of a failed receipt go back to its predecessor.
        const attached = actions.reduce(
          (sum, a) => sum + BigInt(a.transfer?.deposit ?? a.functionCall?.deposit ?? 0n),
          0n,
        );
        if (receiver !== predecessor && deposited > 0n)
          this.accounts.get(receiver)!.amount -= deposited;
        this.credit(predecessor, attached);
      }
      refundGas -= burnt;
      receipts.push(this.outcome(id, block, receiver, status, burnt, { logs, receipts: children }));
      return status;
    };
    const pending: {
      id: string;
      predecessor: string;
      receiver: string;
      actions: readonly Action[];
    }[] = [];
    const first = run(firstReceipt, tx.signerId, tx.receiverId, tx.actions);
    while (pending.length) {
      const next = pending.shift()!;
      run(next.id, next.predecessor, next.receiver, next.actions);
    }
    if (refundGas > 0n) this.credit(tx.signerId, refundGas * GAS_PRICE);
    record.receiptsOutcome = receipts;
    record.status = first;
  }

  private credit(accountId: string, amount: bigint): void {
    const a = this.accounts.get(accountId);
    if (a) a.amount += amount;
  }

  /** NEP-366: checks a delegate action as the runtime does, and advances the sender's key nonce. */
  private delegate(
    signed: { delegateAction: DelegateAction; signature: unknown },
    txReceiver: string,
  ): { error: unknown } | { receiverId: string; actions: readonly Action[] } {
    const da = signed.delegateAction;
    const pk = keyOf(da.publicKey);
    if (!verifies(pk, sha256(encodeDelegateAction(da)), signed.signature)) {
      return { error: "DelegateActionInvalidSignature" };
    }
    if (da.senderId !== txReceiver) {
      return {
        error: {
          DelegateActionSenderDoesNotMatchTxReceiver: {
            sender_id: da.senderId,
            receiver_id: txReceiver,
          },
        },
      };
    }
    if (BigInt(this.head.height) > BigInt(da.maxBlockHeight))
      return { error: "DelegateActionExpired" };
    const key = this.accounts.get(da.senderId)?.keys.get(pk.toString());
    if (!key) {
      return {
        error: {
          DelegateActionAccessKeyError: {
            AccessKeyNotFound: { account_id: da.senderId, public_key: pk.toString() },
          },
        },
      };
    }
    const nonce = BigInt(da.nonce);
    if (nonce <= key.nonce) {
      return {
        error: {
          DelegateActionInvalidNonce: {
            delegate_nonce: Number(nonce),
            ak_nonce: Number(key.nonce),
          },
        },
      };
    }
    const upper = BigInt(this.head.height) * 1_000_000n;
    if (nonce >= upper) {
      return {
        error: {
          DelegateActionNonceTooLarge: {
            delegate_nonce: Number(nonce),
            upper_bound: Number(upper),
          },
        },
      };
    }
    if (key.permission !== "FullAccess") {
      const fc = key.permission.FunctionCall;
      const only = da.actions.length === 1 ? da.actions[0]!.functionCall : undefined;
      if (
        !only ||
        BigInt(only.deposit) !== 0n ||
        da.receiverId !== fc.receiver_id ||
        (fc.method_names.length > 0 && !fc.method_names.includes(only.methodName))
      ) {
        return { error: { DelegateActionAccessKeyError: "RequiresFullAccess" } };
      }
    }
    if (da.actions.some((a) => a.functionCall && BigInt(a.functionCall.gas) > MAX_PREPAID_GAS)) {
      return { error: { TotalPrepaidGasExceeded: { limit: Number(MAX_PREPAID_GAS) } } };
    }
    key.nonce = nonce;
    return { receiverId: da.receiverId, actions: da.actions };
  }

  private mustAccount(accountId: string): AccountState {
    const a = this.accounts.get(accountId);
    if (!a) throw new Error(`no account ${accountId}`);
    return a;
  }
}
