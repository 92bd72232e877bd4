/**
 * A local Starknet that executes for real, for the devnet and tests (no
 * Starknet node can run here). It holds ERC-20 tokens (USDC, and STRK as
 * the v3 fee token) and SNIP-9 v2 accounts that behave as OpenZeppelin's:
 *
 * - an account stores only the x-coordinate of its Stark key, so a
 *   signature is checked against both points with that x (`ec.starkCurve`);
 * - `is_valid_signature(hash, signature)` answers `VALID` or 0;
 * - `execute_from_outside_v2` checks the caller (or ANY_CALLER), the time
 *   window against the block timestamp, the single-use nonce and the
 *   signature over the SNIP-12 hash starknet.js computes, then runs the calls;
 * - INVOKE v3 transactions are refused unless the sender is an account, the
 *   transaction hash recomputed from the fields carries the sender's
 *   signature, the nonce is the next one and the sender's STRK covers the
 *   largest fee the resource bounds allow. They run at the next block: a
 *   failing call reverts its effects (the nonce and the fee stay spent);
 * - a contract reads the transaction it runs in (its signature, resource
 *   bounds, tip and nonce, as Cairo's `get_execution_info` gives them), and
 *   a simulation gives it what the simulated transaction carries: an empty
 *   signature and zero bounds when starknet.js skips validation;
 * - a revert reason names the calls the panic went up through, outermost
 *   first, as a node's does ("Error in contract (contract address: …,
 *   class hash: …, selector: …)"), and `starknet_traceTransaction` gives a
 *   mined transaction's trace.
 *
 * Blocks are produced on a timer. `withhold` keeps submitted transactions
 * out of blocks (RECEIVED) until `release()`, to play a slow sequencer.
 */
import { randomBytes } from "node:crypto";
import { OutsideExecutionTypesV2, ec, hash, typedData, type TypedData } from "starknet";

export type Felt = bigint;

const selectorOf = (name: string): Felt => BigInt(hash.getSelectorFromName(name));
export const toHex = (v: bigint): string => `0x${v.toString(16)}`;

const VALID = 0x56414c4944n;
const ANY_CALLER = 0x414e595f43414c4c4552n;
const U128 = 1n << 128n;
const FELT_PRIME = 2n ** 251n + 17n * 2n ** 192n + 1n;
/** The SNIP-9 v2 interface id OpenZeppelin accounts register (SRC5). */
const SNIP9_V2_INTERFACE_ID = 0x1d1144bb2138366ff28d8e9ab57456b1d332ac42196230c3a602003c89872n;
const SRC6_INTERFACE_ID = 0x2ceccef7f994940b3962a6c67e0ba4fcd37df7d131417c604f91e03caecc1cdn;

/** Class hashes the node reports (OpenZeppelin account, a Cairo 1 ERC-20). */
const ACCOUNT_CLASS_HASH = "0x05b4b537eaa2399e3aa99c4e2e0208ebd6c71bc1467938cd52c798c601e43564";
const ERC20_CLASS_HASH = "0x04ad3c1dc8413453db314497945b6903e1c766495a1e60492d44da9c2a986e4b";
export const SEQUENCER_ADDRESS = 0x1176a1bd84444c89232ec27754698e5d2e7e1a7f1539f12027f28b23ec9f3d8n;

const SEL = {
  transfer: selectorOf("transfer"),
  balance_of: selectorOf("balance_of"),
  balanceOf: selectorOf("balanceOf"),
  decimals: selectorOf("decimals"),
  symbol: selectorOf("symbol"),
  execute: selectorOf("__execute__"),
  executeFromOutsideV2: selectorOf("execute_from_outside_v2"),
  isValidSignature: selectorOf("is_valid_signature"),
  isValidOutsideNonce: selectorOf("is_valid_outside_execution_nonce"),
  supportsInterface: selectorOf("supports_interface"),
  getPublicKey: selectorOf("get_public_key"),
};
export const TRANSFER_EVENT_KEY = selectorOf("Transfer");

/** A JSON-RPC error the node answers, with the spec's code. */
export class StarknetRpcFailure extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

/** One call a panic went up through. */
interface RevertFrame {
  address: Felt;
  classHash: string;
  selector: Felt;
}

class Revert extends Error {
  /** The calls the panic went up through, outermost first (filled as it unwinds). */
  readonly frames: RevertFrame[] = [];

  constructor(
    message: string,
    /** Gas spent when the revert is running out of it: the whole bound. */
    readonly l2Gas?: number,
  ) {
    super(message);
  }
}

/** A felt as a node writes it in a revert reason: 64 hex digits. */
const felt64 = (v: Felt): string => `0x${v.toString(16).padStart(64, "0")}`;

/** The selector Cairo uses for a `ByteArray` panic (a message longer than a short string). */
const BYTE_ARRAY_MAGIC = "0x46a6158a16a947e5916b2a2ca68501a45e93d7110e81aa2d6438b1c57c879a3";

/** A panic's data as a node writes it: the felt and its text. */
function panicText(message: string): string {
  const bytes = Buffer.from(message, "utf8");
  return bytes.length <= 31
    ? `0x${bytes.toString("hex")} ('${message}')`
    : `${BYTE_ARRAY_MAGIC} ("${message}")`;
}

/**
 * A revert reason as a Starknet node gives it in a receipt and a trace: the
 * transaction's entry point, then every call the panic went up through
 * (outermost first, the one that panicked last), then the panic's data.
 */
function revertReasonOf(e: Revert, sender: Felt): string {
  const header = (f: RevertFrame) =>
    `(contract address: ${felt64(f.address)}, class hash: ${felt64(BigInt(f.classHash))}, selector: ${felt64(f.selector)}):`;
  const frames: RevertFrame[] =
    e.frames.length > 0
      ? e.frames
      : [{ address: sender, classHash: ACCOUNT_CLASS_HASH, selector: SEL.execute }];
  return [
    "Transaction execution has failed:",
    `0: Error in the called contract ${header(frames[0]!)}`,
    "Execution failed. Failure reason:",
    ...frames.map((f) => `Error in contract ${header(f)}`),
    `${panicText(e.message)}.`,
    "",
  ].join("\n");
}

/**
 * What a contract can read of the transaction it runs in (Cairo's
 * `get_execution_info().tx_info`), as far as the accounts here look.
 */
interface TxInfo {
  signature: readonly Felt[];
  /** The L2 gas bound's `max_amount`: 0 in a query with no bounds. */
  l2GasBound: Felt;
  tip: Felt;
  nonce: Felt;
}

/** A `starknet_call` runs in no transaction: everything zero. */
const NO_TRANSACTION: TxInfo = { signature: [], l2GasBound: 0n, tip: 0n, nonce: 0n };

/**
 * Account code beyond the standard checks, to play hostile payers:
 * `tellsSimulation` reads the transaction its outside execution runs in and
 * panics 'SRC9: invalid caller' when it carries a signature and resource
 * bounds (a transaction as sent), passing a query with neither (what a
 * simulation that skips validation gives it); `refusesOutside` panics so in
 * every outside execution (an account whose answer changed since it was
 * checked).
 */
export type AccountQuirk = "tellsSimulation" | "refusesOutside";

interface Token {
  kind: "erc20";
  symbol: string;
  decimals: number;
  balances: Map<Felt, Felt>;
}
interface AccountContract {
  kind: "account";
  /** The x-coordinate of the Stark public key, as OpenZeppelin stores it. */
  publicKey: Felt;
  nonce: Felt;
  usedOutsideNonces: Set<Felt>;
  quirk?: AccountQuirk;
}
type Contract = Token | AccountContract;

function cloneContracts(c: Map<Felt, Contract>): Map<Felt, Contract> {
  const out = new Map<Felt, Contract>();
  for (const [a, v] of c) {
    out.set(
      a,
      v.kind === "erc20"
        ? { ...v, balances: new Map(v.balances) }
        : { ...v, usedOutsideNonces: new Set(v.usedOutsideNonces) },
    );
  }
  return out;
}

interface RpcEvent {
  order: number;
  keys: string[];
  data: string[];
}

/** A FUNCTION_INVOCATION of a trace (RPC 0.8+ shape). */
export interface Invocation {
  contract_address: string;
  entry_point_selector: string;
  calldata: string[];
  caller_address: string;
  class_hash: string;
  entry_point_type: "EXTERNAL";
  call_type: "CALL";
  result: string[];
  calls: Invocation[];
  events: RpcEvent[];
  messages: [];
  execution_resources: { l1_gas: number; l2_gas: number };
  is_reverted: boolean;
}

/** An INVOKE v3 transaction as the RPC carries it. */
export interface RpcInvokeV3 {
  type: "INVOKE";
  sender_address: string;
  calldata: string[];
  version: string;
  signature: string[];
  nonce: string;
  resource_bounds: Record<
    "l1_gas" | "l2_gas" | "l1_data_gas",
    { max_amount: string; max_price_per_unit: string }
  >;
  tip: string;
  paymaster_data: string[];
  account_deployment_data: string[];
  nonce_data_availability_mode: "L1" | "L2";
  fee_data_availability_mode: "L1" | "L2";
}

export interface TxRecord {
  hash: string;
  tx: RpcInvokeV3;
  sender: Felt;
  finality: "RECEIVED" | "ACCEPTED_ON_L2";
  execution?: "SUCCEEDED" | "REVERTED";
  revertReason?: string;
  blockNumber?: number;
  blockHash?: string;
  /** Emitted events in order, each with the contract that emitted it. */
  events: { from_address: string; keys: string[]; data: string[] }[];
  fee: bigint;
  resources: { l1_gas: number; l1_data_gas: number; l2_gas: number };
  /** Its trace once in a block (`starknet_traceTransaction`). */
  trace?: Record<string, unknown>;
}

export interface Block {
  number: number;
  hash: string;
  parentHash: string;
  timestamp: number;
  transactions: string[];
}

export interface GasPrices {
  l1: bigint;
  l1Data: bigint;
  l2: bigint;
}

interface Executed {
  invocation?: Invocation;
  revertReason?: string;
  resources: { l1_gas: number; l1_data_gas: number; l2_gas: number };
  events: TxRecord["events"];
}

/** L2 gas each contract call costs here, and a transaction's fixed part. */
const L2_GAS_PER_CALL = 150_000;
const L2_GAS_BASE = 400_000;
const L1_DATA_GAS = 192;

const DA_MODE = { L1: 0, L2: 1 } as const;

function feltOf(v: unknown, what: string): Felt {
  if (typeof v !== "string" && typeof v !== "number" && typeof v !== "bigint") {
    throw new StarknetRpcFailure(-32602, `Invalid params: ${what} must be a felt`);
  }
  let n: bigint;
  try {
    n = BigInt(v);
  } catch {
    throw new StarknetRpcFailure(-32602, `Invalid params: ${what} must be a felt`);
  }
  if (n < 0n || n >= FELT_PRIME) {
    throw new StarknetRpcFailure(-32602, `Invalid params: ${what} is not a field element`);
  }
  return n;
}

/**
 * Signatures already found valid, and the y-parity each account key
 * verified with. A Stark ECDSA check is a pure function of the key, the
 * message hash and (r, s), so remembering a valid one changes no answer: a
 * payer's signature that `is_valid_signature` checked while the service
 * verified its payment is not checked again when its outside execution
 * runs, and a key's point is tried first with the parity that worked
 * before. What was refused is never remembered, and is checked again.
 */
const VERIFIED_KEPT = 20_000;
const verified = new Set<string>();
const parityOf = new Map<Felt, "02" | "03">();

/** Whether `signature` ([r, s]) is the key with x-coordinate `publicKey` signing `msgHash`. */
function starkSignatureValid(publicKey: Felt, msgHash: Felt, signature: readonly Felt[]): boolean {
  if (signature.length !== 2) return false;
  const [r, s] = signature as [Felt, Felt];
  const memo = `${publicKey}:${msgHash}:${r}:${s}`;
  if (verified.has(memo)) return true;
  const x = publicKey.toString(16).padStart(64, "0");
  const sig = new ec.starkCurve.Signature(r, s);
  const known = parityOf.get(publicKey);
  const parities = known === "03" ? (["03", "02"] as const) : (["02", "03"] as const);
  for (const prefix of parities) {
    try {
      if (ec.starkCurve.verify(sig, toHex(msgHash), prefix + x)) {
        parityOf.set(publicKey, prefix);
        verified.add(memo);
        if (verified.size > VERIFIED_KEPT) verified.delete(verified.values().next().value!);
        return true;
      }
    } catch {
      // Not a point on the curve, or r/s out of range: not a valid signature.
    }
  }
  return false;
}

/** The SNIP-12 (revision 1) typed data of a SNIP-9 v2 outside execution. */
function outsideExecutionTypedData(
  chainId: Felt,
  oe: {
    caller: Felt;
    nonce: Felt;
    after: Felt;
    before: Felt;
    calls: { to: Felt; selector: Felt; calldata: Felt[] }[];
  },
): TypedData {
  return {
    types: OutsideExecutionTypesV2,
    primaryType: "OutsideExecution",
    domain: {
      name: "Account.execute_from_outside",
      version: "2",
      chainId: toHex(chainId),
      revision: "1",
    },
    message: {
      Caller: toHex(oe.caller),
      Nonce: toHex(oe.nonce),
      "Execute After": toHex(oe.after),
      "Execute Before": toHex(oe.before),
      Calls: oe.calls.map((c) => ({
        To: toHex(c.to),
        Selector: toHex(c.selector),
        Calldata: c.calldata.map(toHex),
      })),
    },
  };
}

export interface StarknetLedgerOptions {
  /** `starknet_chainId` as a hex felt (default SN_MAIN). */
  chainId?: string;
  gasPrices?: Partial<GasPrices>;
  feeToken: string;
}

export class StarknetLedger {
  readonly chainId: Felt;
  readonly feeToken: Felt;
  gasPrices: GasPrices;
  /** Submitted transactions stay out of blocks while set (RECEIVED), until `release()`. */
  withhold = false;
  private contracts = new Map<Felt, Contract>();
  private mempool: TxRecord[] = [];
  private readonly txs = new Map<string, TxRecord>();
  readonly blocks: Block[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(opts: StarknetLedgerOptions) {
    this.chainId = BigInt(opts.chainId ?? "0x534e5f4d41494e");
    this.feeToken = BigInt(opts.feeToken);
    this.gasPrices = {
      l1: 30_000_000_000_000n,
      l1Data: 1_000_000_000n,
      l2: 8_000_000_000n,
      ...opts.gasPrices,
    };
    this.blocks.push({
      number: 0,
      // Salted: a devnet started afresh is another chain, and must look like one
      // (the service refuses to reconcile older records against it).
      hash: hash.computePoseidonHashOnElements([
        0n,
        this.chainId,
        BigInt(`0x${randomBytes(16).toString("hex")}`),
      ]),
      parentHash: "0x0",
      timestamp: this.now(),
      transactions: [],
    });
  }

  // ---- set-up (genesis) ----

  deployToken(address: string, symbol: string, decimals: number): void {
    this.contracts.set(BigInt(address), { kind: "erc20", symbol, decimals, balances: new Map() });
  }

  /** Deploys an account for a private key at the address a standard deployment would give it. */
  deployAccount(privateKey: string): string {
    const publicKey = BigInt(ec.starkCurve.getStarkKey(privateKey));
    const address = BigInt(
      hash.calculateContractAddressFromHash(publicKey, ACCOUNT_CLASS_HASH, [publicKey], 0),
    );
    this.contracts.set(address, {
      kind: "account",
      publicKey,
      nonce: 0n,
      usedOutsideNonces: new Set(),
    });
    return toHex(address);
  }

  /** The address an account for `privateKey` would have, deployed or not. */
  static accountAddress(privateKey: string): string {
    const publicKey = BigInt(ec.starkCurve.getStarkKey(privateKey));
    return toHex(
      BigInt(hash.calculateContractAddressFromHash(publicKey, ACCOUNT_CLASS_HASH, [publicKey], 0)),
    );
  }

  mint(token: string, to: string, amount: bigint): void {
    const t = this.token(BigInt(token));
    const who = BigInt(to);
    t.balances.set(who, (t.balances.get(who) ?? 0n) + amount);
  }

  /** Gives an account's code a quirk (tests: a hostile payer), or takes it away. */
  setQuirk(account: string, quirk: AccountQuirk | undefined): void {
    const c = this.contracts.get(BigInt(account));
    if (c?.kind !== "account") throw new Error(`${account} is not an account`);
    if (quirk === undefined) delete c.quirk;
    else c.quirk = quirk;
  }

  /** Takes tokens away (tests: a payer whose balance no longer covers). */
  burn(token: string, from: string, amount: bigint): void {
    const t = this.token(BigInt(token));
    const who = BigInt(from);
    t.balances.set(who, (t.balances.get(who) ?? 0n) - amount);
  }

  balanceOf(token: string, who: string): bigint {
    return this.token(BigInt(token)).balances.get(BigInt(who)) ?? 0n;
  }

  /** The account's nonce in the latest block. */
  nonceOf(account: string): bigint {
    const c = this.contracts.get(BigInt(account));
    return c?.kind === "account" ? c.nonce : 0n;
  }

  outsideNonceUsed(account: string, nonce: string): boolean {
    const c = this.contracts.get(BigInt(account));
    return c?.kind === "account" && c.usedOutsideNonces.has(BigInt(nonce));
  }

  transaction(hash: string): TxRecord | undefined {
    return this.txs.get(toHex(BigInt(hash)));
  }

  get latest(): Block {
    return this.blocks[this.blocks.length - 1]!;
  }

  // ---- blocks ----

  start(blockMs: number): void {
    this.stop();
    this.timer = setInterval(() => this.produceBlock(), blockMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Lets withheld transactions into the next block. */
  release(): void {
    this.withhold = false;
  }

  /** Closes a block with every transaction received (none while withholding). */
  produceBlock(): Block {
    const parent = this.latest;
    const timestamp = Math.max(this.now(), parent.timestamp);
    const number = parent.number + 1;
    const included = this.withhold ? [] : this.mempool.splice(0);
    const blockHash = String(
      hash.computePoseidonHashOnElements([
        BigInt(number),
        BigInt(parent.hash),
        BigInt(timestamp),
        ...included.map((t) => BigInt(t.hash)),
      ]),
    );
    for (const rec of included) this.apply(rec, timestamp, number, blockHash);
    const block = {
      number,
      hash: blockHash,
      parentHash: parent.hash,
      timestamp,
      transactions: included.map((t) => t.hash),
    };
    this.blocks.push(block);
    return block;
  }

  // ---- what the RPC serves ----

  classHashAt(address: Felt): string {
    const c = this.contracts.get(address);
    if (!c) throw new StarknetRpcFailure(20, "Contract not found");
    return c.kind === "account" ? ACCOUNT_CLASS_HASH : ERC20_CLASS_HASH;
  }

  /** The nonce at `latest`, or counting received transactions at `pre_confirmed`. */
  nonceAt(address: Felt, preConfirmed: boolean): bigint {
    const c = this.contracts.get(address);
    if (!c) throw new StarknetRpcFailure(20, "Contract not found");
    if (c.kind !== "account") return 0n;
    return preConfirmed
      ? c.nonce + BigInt(this.mempool.filter((t) => t.sender === address).length)
      : c.nonce;
  }

  /** `starknet_call`: a read-only call against the latest state. */
  call(to: Felt, selector: Felt, calldata: Felt[]): string[] {
    if (!this.contracts.has(to)) throw new StarknetRpcFailure(20, "Contract not found");
    const world = cloneContracts(this.contracts);
    try {
      return this.invoke(world, NO_TRANSACTION, this.now(), 0n, to, selector, calldata).result;
    } catch (e) {
      if (e instanceof StarknetRpcFailure) throw e;
      throw new StarknetRpcFailure(40, "Contract error", {
        revert_error: {
          contract_address: toHex(to),
          class_hash: this.classHashAt(to),
          selector: toHex(selector),
          error: (e as Error).message,
        },
      });
    }
  }

  /** `starknet_addInvokeTransaction`: checked as the sequencer's gateway does, then queued for the next block. */
  addInvoke(tx: RpcInvokeV3): string {
    if (tx?.type !== "INVOKE")
      throw new StarknetRpcFailure(61, "The transaction version is not supported");
    if (BigInt(tx.version) !== 3n)
      throw new StarknetRpcFailure(61, "The transaction version is not supported");
    const sender = feltOf(tx.sender_address, "sender_address");
    const account = this.contracts.get(sender);
    if (account?.kind !== "account") throw new StarknetRpcFailure(20, "Contract not found");
    const txHash = this.hashOf(tx);
    if (this.txs.has(txHash))
      throw new StarknetRpcFailure(
        59,
        "A transaction with the same hash already exists in the mempool",
      );
    const expected = this.nonceAt(sender, true);
    const nonce = feltOf(tx.nonce, "nonce");
    if (nonce !== expected) {
      throw new StarknetRpcFailure(
        52,
        "Invalid transaction nonce",
        `Account nonce: ${toHex(expected)}; got: ${toHex(nonce)}.`,
      );
    }
    if (
      !starkSignatureValid(
        account.publicKey,
        BigInt(txHash),
        tx.signature.map((s) => feltOf(s, "signature")),
      )
    ) {
      throw new StarknetRpcFailure(55, "Account validation failed", "invalid signature");
    }
    const bounds = this.boundsOf(tx);
    if (
      bounds.l2.price < this.gasPrices.l2 ||
      bounds.l1.price < this.gasPrices.l1 ||
      bounds.l1Data.price < this.gasPrices.l1Data ||
      bounds.l2.amount < BigInt(L2_GAS_BASE)
    ) {
      throw new StarknetRpcFailure(
        53,
        "The transaction's resources don't cover validation or the minimal transaction fee",
      );
    }
    const maxFee = this.maxFee(tx);
    if (this.balanceOf(toHex(this.feeToken), toHex(sender)) < maxFee) {
      throw new StarknetRpcFailure(
        54,
        "Account balance is smaller than the transaction's maximal fee (calculated as the sum of each resource's limit x max price)",
      );
    }
    const rec: TxRecord = {
      hash: txHash,
      tx,
      sender,
      finality: "RECEIVED",
      events: [],
      fee: 0n,
      resources: { l1_gas: 0, l1_data_gas: 0, l2_gas: 0 },
    };
    this.txs.set(txHash, rec);
    this.mempool.push(rec);
    return txHash;
  }

  /** `starknet_simulateTransactions`: each on a copy of the latest state, in order. */
  simulate(
    txs: RpcInvokeV3[],
    flags: readonly string[],
  ): { transaction_trace: unknown; fee_estimation: unknown }[] {
    const world = cloneContracts(this.contracts);
    const skipValidate = flags.includes("SKIP_VALIDATE");
    const skipFee = flags.includes("SKIP_FEE_CHARGE");
    return txs.map((tx, i) => {
      // As a sequencer charging the fee checks before it runs anything.
      if (
        !skipFee &&
        this.maxFee(tx) >
          ((world.get(this.feeToken) as Token).balances.get(BigInt(tx.sender_address)) ?? 0n)
      ) {
        throw new StarknetRpcFailure(41, "Transaction execution error", {
          transaction_index: i,
          execution_error:
            "Resources bounds exceed balance: the sender's STRK does not cover the transaction's maximal fee",
        });
      }
      const run = this.dryRun(world, tx, i, skipValidate);
      const fee = this.feeOf(run.resources);
      const feeTransfer = skipFee
        ? undefined
        : this.chargeFee(world, BigInt(tx.sender_address), fee);
      return {
        transaction_trace: {
          type: "INVOKE",
          ...(run.validate ? { validate_invocation: run.validate } : {}),
          execute_invocation: run.invocation ?? { revert_reason: run.revertReason },
          ...(feeTransfer ? { fee_transfer_invocation: feeTransfer.invocation } : {}),
          execution_resources: run.resources,
        },
        fee_estimation: this.feeEstimate(run.resources),
      };
    });
  }

  /** `starknet_estimateFee`: as a simulation; a reverting transaction is an error, as on a node. */
  estimateFee(txs: RpcInvokeV3[], flags: readonly string[]): unknown[] {
    const world = cloneContracts(this.contracts);
    return txs.map((tx, i) => {
      const run = this.dryRun(world, tx, i, flags.includes("SKIP_VALIDATE"));
      if (run.revertReason !== undefined) {
        throw new StarknetRpcFailure(41, "Transaction execution error", {
          transaction_index: i,
          execution_error: run.revertReason,
        });
      }
      return this.feeEstimate(run.resources);
    });
  }

  // ---- execution ----

  private now(): number {
    return Math.floor(Date.now() / 1000);
  }

  private token(address: Felt): Token {
    const t = this.contracts.get(address);
    if (t?.kind !== "erc20") throw new Error(`${toHex(address)} is not a token`);
    return t;
  }

  private hashOf(tx: RpcInvokeV3): string {
    const b = this.boundsOf(tx);
    for (const field of [
      "calldata",
      "signature",
      "paymaster_data",
      "account_deployment_data",
    ] as const) {
      if (!Array.isArray(tx[field]))
        throw new StarknetRpcFailure(-32602, `Invalid params: ${field} must be an array`);
    }
    const mode = (m: string, what: string) => {
      if (m !== "L1" && m !== "L2")
        throw new StarknetRpcFailure(-32602, `Invalid params: ${what} must be L1 or L2`);
      return DA_MODE[m];
    };
    return toHex(
      BigInt(
        hash.calculateInvokeTransactionHash({
          senderAddress: toHex(feltOf(tx.sender_address, "sender_address")),
          version: toHex(BigInt(tx.version)) as "0x3",
          compiledCalldata: tx.calldata.map((c) => feltOf(c, "calldata").toString()),
          chainId: toHex(this.chainId) as "0x534e5f4d41494e",
          nonce: feltOf(tx.nonce, "nonce"),
          accountDeploymentData: tx.account_deployment_data.map((c) =>
            feltOf(c, "account_deployment_data"),
          ),
          nonceDataAvailabilityMode: mode(
            tx.nonce_data_availability_mode,
            "nonce_data_availability_mode",
          ),
          feeDataAvailabilityMode: mode(
            tx.fee_data_availability_mode,
            "fee_data_availability_mode",
          ),
          resourceBounds: {
            l1_gas: { max_amount: b.l1.amount, max_price_per_unit: b.l1.price },
            l2_gas: { max_amount: b.l2.amount, max_price_per_unit: b.l2.price },
            l1_data_gas: { max_amount: b.l1Data.amount, max_price_per_unit: b.l1Data.price },
          },
          tip: feltOf(tx.tip, "tip"),
          paymasterData: tx.paymaster_data.map((c) => feltOf(c, "paymaster_data")),
        } as Parameters<typeof hash.calculateInvokeTransactionHash>[0]),
      ),
    );
  }

  private boundsOf(tx: RpcInvokeV3) {
    const rb = tx.resource_bounds;
    if (!rb?.l1_gas || !rb.l2_gas || !rb.l1_data_gas) {
      throw new StarknetRpcFailure(
        -32602,
        "Invalid params: resource_bounds needs l1_gas, l2_gas and l1_data_gas",
      );
    }
    const one = (r: { max_amount: string; max_price_per_unit: string }, what: string) => ({
      amount: feltOf(r.max_amount, `${what}.max_amount`),
      price: feltOf(r.max_price_per_unit, `${what}.max_price_per_unit`),
    });
    return {
      l1: one(rb.l1_gas, "l1_gas"),
      l2: one(rb.l2_gas, "l2_gas"),
      l1Data: one(rb.l1_data_gas, "l1_data_gas"),
    };
  }

  private maxFee(tx: RpcInvokeV3): bigint {
    const b = this.boundsOf(tx);
    const tip = BigInt(tx.tip);
    return (
      b.l1.amount * b.l1.price + b.l1Data.amount * b.l1Data.price + b.l2.amount * (b.l2.price + tip)
    );
  }

  private feeOf(r: Executed["resources"], tip = 0n): bigint {
    return (
      BigInt(r.l1_gas) * this.gasPrices.l1 +
      BigInt(r.l1_data_gas) * this.gasPrices.l1Data +
      BigInt(r.l2_gas) * (this.gasPrices.l2 + tip)
    );
  }

  private feeEstimate(r: Executed["resources"]) {
    return {
      l1_gas_consumed: toHex(BigInt(r.l1_gas)),
      l1_gas_price: toHex(this.gasPrices.l1),
      l2_gas_consumed: toHex(BigInt(r.l2_gas)),
      l2_gas_price: toHex(this.gasPrices.l2),
      l1_data_gas_consumed: toHex(BigInt(r.l1_data_gas)),
      l1_data_gas_price: toHex(this.gasPrices.l1Data),
      overall_fee: toHex(this.feeOf(r)),
      unit: "FRI",
    };
  }

  /** Runs a transaction on `world` (changed in place) for a simulation or an estimate. */
  private dryRun(
    world: Map<Felt, Contract>,
    tx: RpcInvokeV3,
    index: number,
    skipValidate: boolean,
  ): Executed & { validate?: Invocation } {
    if (tx?.type !== "INVOKE")
      throw new StarknetRpcFailure(61, "The transaction version is not supported");
    const sender = feltOf(tx.sender_address, "sender_address");
    const account = world.get(sender);
    if (account?.kind !== "account") {
      throw new StarknetRpcFailure(41, "Transaction execution error", {
        transaction_index: index,
        execution_error: "the sender is not a deployed account",
      });
    }
    let validate: Invocation | undefined;
    if (!skipValidate) {
      // As a node's simulation: a nonce behind the account's is refused, one
      // ahead of it (sends not in a block yet) is not.
      const nonce = feltOf(tx.nonce, "nonce");
      if (nonce < account.nonce) {
        throw new StarknetRpcFailure(41, "Transaction execution error", {
          transaction_index: index,
          execution_error: `Invalid transaction nonce of contract at address ${toHex(sender)}. Account nonce: ${toHex(account.nonce)}; got: ${toHex(nonce)}.`,
        });
      }
      const txHash = this.hashOf(tx);
      if (
        !starkSignatureValid(
          account.publicKey,
          BigInt(txHash),
          tx.signature.map((s) => feltOf(s, "signature")),
        )
      ) {
        throw new StarknetRpcFailure(41, "Transaction execution error", {
          transaction_index: index,
          execution_error: "Account validation failed: invalid signature",
        });
      }
      validate = this.frame(sender, 0n, selectorOf("__validate__"), tx.calldata.map(BigInt), [
        "0x56414c4944",
      ]);
    }
    account.nonce += 1n;
    const info = this.txInfoOf(tx);
    return {
      ...this.execute(
        world,
        sender,
        tx.calldata.map((c) => feltOf(c, "calldata")),
        this.now(),
        info,
        // Bounds of zero (a query) do not limit a simulation; given ones do, as on a node.
        info.l2GasBound > 0n ? info.l2GasBound : undefined,
      ),
      ...(validate ? { validate } : {}),
    };
  }

  /** What the transaction tells the contracts it runs. */
  private txInfoOf(tx: RpcInvokeV3): TxInfo {
    return {
      signature: tx.signature.map((s) => feltOf(s, "signature")),
      l2GasBound: this.boundsOf(tx).l2.amount,
      tip: feltOf(tx.tip, "tip"),
      nonce: feltOf(tx.nonce, "nonce"),
    };
  }

  /** `__execute__` of an account, with its effects kept only when it succeeds. */
  private execute(
    world: Map<Felt, Contract>,
    sender: Felt,
    calldata: Felt[],
    timestamp: number,
    tx: TxInfo,
    maxL2Gas?: bigint,
  ): Executed {
    const snapshot = cloneContracts(world);
    try {
      const invocation = this.invoke(world, tx, timestamp, 0n, sender, SEL.execute, calldata);
      const calls = countCalls(invocation);
      const l2 = L2_GAS_BASE + L2_GAS_PER_CALL * calls;
      if (maxL2Gas !== undefined && BigInt(l2) > maxL2Gas) {
        const out = new Revert("Out of gas", Number(maxL2Gas));
        out.frames.push({ address: sender, classHash: ACCOUNT_CLASS_HASH, selector: SEL.execute });
        throw out;
      }
      return {
        invocation,
        resources: {
          l1_gas: 0,
          l1_data_gas: L1_DATA_GAS,
          l2_gas: L2_GAS_BASE + L2_GAS_PER_CALL * calls,
        },
        events: flattenEvents(invocation),
      };
    } catch (e) {
      if (!(e instanceof Revert)) throw e;
      world.clear();
      for (const [k, v] of snapshot) world.set(k, v);
      return {
        revertReason: revertReasonOf(e, sender),
        resources: {
          l1_gas: 0,
          l1_data_gas: L1_DATA_GAS,
          l2_gas: e.l2Gas ?? L2_GAS_BASE + L2_GAS_PER_CALL,
        },
        events: [],
      };
    }
  }

  /** A transaction's turn in a block: nonce, execution, then the fee in STRK. */
  private apply(rec: TxRecord, timestamp: number, blockNumber: number, blockHash: string): void {
    const account = this.contracts.get(rec.sender) as AccountContract;
    account.nonce += 1n;
    const b = this.boundsOf(rec.tx);
    const run = this.execute(
      this.contracts,
      rec.sender,
      rec.tx.calldata.map(BigInt),
      timestamp,
      this.txInfoOf(rec.tx),
      b.l2.amount,
    );
    const fee = this.feeOf(run.resources, BigInt(rec.tx.tip));
    const charged = this.chargeFee(this.contracts, rec.sender, fee);
    Object.assign(rec, {
      finality: "ACCEPTED_ON_L2",
      execution: run.invocation ? "SUCCEEDED" : "REVERTED",
      ...(run.revertReason !== undefined ? { revertReason: run.revertReason } : {}),
      blockNumber,
      blockHash,
      events: [...run.events, ...(charged ? charged.events : [])],
      fee,
      resources: run.resources,
      trace: {
        type: "INVOKE",
        execute_invocation: run.invocation ?? { revert_reason: run.revertReason },
        ...(charged ? { fee_transfer_invocation: charged.invocation } : {}),
        execution_resources: run.resources,
      },
    });
  }

  private chargeFee(world: Map<Felt, Contract>, payer: Felt, fee: bigint) {
    const strk = world.get(this.feeToken) as Token;
    const balance = strk.balances.get(payer) ?? 0n;
    const paid = fee > balance ? balance : fee;
    strk.balances.set(payer, balance - paid);
    strk.balances.set(SEQUENCER_ADDRESS, (strk.balances.get(SEQUENCER_ADDRESS) ?? 0n) + paid);
    const event = {
      keys: [toHex(TRANSFER_EVENT_KEY), toHex(payer), toHex(SEQUENCER_ADDRESS)],
      data: [toHex(paid % U128), toHex(paid / U128)],
    };
    const invocation = this.frame(
      this.feeToken,
      payer,
      SEL.transfer,
      [SEQUENCER_ADDRESS, paid % U128, paid / U128],
      ["0x1"],
    );
    invocation.events.push({ order: 0, ...event });
    return { invocation, events: [{ from_address: toHex(this.feeToken), ...event }] };
  }

  private frame(
    to: Felt,
    caller: Felt,
    selector: Felt,
    calldata: Felt[],
    result: string[],
  ): Invocation {
    const c = this.contracts.get(to);
    return {
      contract_address: toHex(to),
      entry_point_selector: toHex(selector),
      calldata: calldata.map(toHex),
      caller_address: toHex(caller),
      class_hash: c?.kind === "account" ? ACCOUNT_CLASS_HASH : ERC20_CLASS_HASH,
      entry_point_type: "EXTERNAL",
      call_type: "CALL",
      result,
      calls: [],
      events: [],
      messages: [],
      execution_resources: { l1_gas: 0, l2_gas: L2_GAS_PER_CALL },
      is_reverted: false,
    };
  }

  /**
   * One contract call; throws `Revert` as a failing Cairo call panics, with
   * this call added to the calls it went up through.
   */
  private invoke(
    world: Map<Felt, Contract>,
    tx: TxInfo,
    timestamp: number,
    caller: Felt,
    to: Felt,
    selector: Felt,
    calldata: Felt[],
  ): Invocation {
    try {
      return this.run(world, tx, timestamp, caller, to, selector, calldata);
    } catch (e) {
      const contract = world.get(to);
      if (e instanceof Revert && contract) {
        e.frames.unshift({
          address: to,
          classHash: contract.kind === "account" ? ACCOUNT_CLASS_HASH : ERC20_CLASS_HASH,
          selector,
        });
      }
      throw e;
    }
  }

  private run(
    world: Map<Felt, Contract>,
    tx: TxInfo,
    timestamp: number,
    caller: Felt,
    to: Felt,
    selector: Felt,
    calldata: Felt[],
  ): Invocation {
    const contract = world.get(to);
    if (!contract) throw new Revert(`Requested contract address ${toHex(to)} is not deployed.`);
    const frame = this.frame(to, caller, selector, calldata, []);
    const emit = (keys: Felt[], data: Felt[]) =>
      frame.events.push({
        order: frame.events.length,
        keys: keys.map(toHex),
        data: data.map(toHex),
      });
    const arg = (i: number) => {
      const v = calldata[i];
      if (v === undefined) throw new Revert("Failed to deserialize param #" + (i + 1));
      return v;
    };
    if (contract.kind === "erc20") {
      if (selector === SEL.transfer) {
        const [recipient, low, high] = [arg(0), arg(1), arg(2)];
        if (low >= U128 || high >= U128) throw new Revert("Failed to deserialize param #2");
        const amount = low + high * U128;
        const balance = contract.balances.get(caller) ?? 0n;
        if (balance < amount) throw new Revert("ERC20: insufficient balance");
        contract.balances.set(caller, balance - amount);
        contract.balances.set(recipient, (contract.balances.get(recipient) ?? 0n) + amount);
        emit([TRANSFER_EVENT_KEY, caller, recipient], [low, high]);
        frame.result = ["0x1"];
      } else if (selector === SEL.balance_of || selector === SEL.balanceOf) {
        const b = contract.balances.get(arg(0)) ?? 0n;
        frame.result = [toHex(b % U128), toHex(b / U128)];
      } else if (selector === SEL.decimals) {
        frame.result = [toHex(BigInt(contract.decimals))];
      } else if (selector === SEL.symbol) {
        frame.result = [toHex(BigInt("0x" + Buffer.from(contract.symbol).toString("hex")))];
      } else {
        throw new Revert("ENTRYPOINT_NOT_FOUND");
      }
      return frame;
    }
    // An account.
    if (selector === SEL.execute) {
      if (caller !== 0n) throw new Revert("Account: invalid caller");
      frame.result = this.runCalls(world, tx, timestamp, to, decodeCalls(calldata, 0).calls, frame);
    } else if (selector === SEL.executeFromOutsideV2) {
      const oe = decodeOutsideExecution(calldata);
      const sent = tx.signature.length > 0 && tx.l2GasBound > 0n;
      if (contract.quirk === "refusesOutside" || (contract.quirk === "tellsSimulation" && sent))
        throw new Revert("SRC9: invalid caller");
      if (oe.caller !== ANY_CALLER && oe.caller !== caller)
        throw new Revert("SRC9: invalid caller");
      if (!(BigInt(timestamp) > oe.after)) throw new Revert("SRC9: now <= execute_after");
      if (!(BigInt(timestamp) < oe.before)) throw new Revert("SRC9: now >= execute_before");
      if (contract.usedOutsideNonces.has(oe.nonce)) throw new Revert("SRC9: duplicated nonce");
      contract.usedOutsideNonces.add(oe.nonce);
      const msgHash = BigInt(
        typedData.getMessageHash(outsideExecutionTypedData(this.chainId, oe), toHex(to)),
      );
      if (!starkSignatureValid(contract.publicKey, msgHash, oe.signature))
        throw new Revert("SRC9: invalid signature");
      frame.result = this.runCalls(world, tx, timestamp, to, oe.calls, frame);
    } else if (selector === SEL.isValidSignature) {
      const msgHash = arg(0);
      const len = Number(arg(1));
      const sig = calldata.slice(2, 2 + len);
      if (sig.length !== len) throw new Revert("Failed to deserialize param #2");
      frame.result = [starkSignatureValid(contract.publicKey, msgHash, sig) ? toHex(VALID) : "0x0"];
    } else if (selector === SEL.isValidOutsideNonce) {
      frame.result = [contract.usedOutsideNonces.has(arg(0)) ? "0x0" : "0x1"];
    } else if (selector === SEL.supportsInterface) {
      const id = arg(0);
      frame.result = [id === SNIP9_V2_INTERFACE_ID || id === SRC6_INTERFACE_ID ? "0x1" : "0x0"];
    } else if (selector === SEL.getPublicKey) {
      frame.result = [toHex(contract.publicKey)];
    } else {
      throw new Revert("ENTRYPOINT_NOT_FOUND");
    }
    return frame;
  }

  private runCalls(
    world: Map<Felt, Contract>,
    tx: TxInfo,
    timestamp: number,
    from: Felt,
    calls: { to: Felt; selector: Felt; calldata: Felt[] }[],
    frame: Invocation,
  ): string[] {
    const results: string[] = [toHex(BigInt(calls.length))];
    for (const c of calls) {
      const inner = this.invoke(world, tx, timestamp, from, c.to, c.selector, c.calldata);
      frame.calls.push(inner);
      results.push(toHex(BigInt(inner.result.length)), ...inner.result);
    }
    return results;
  }
}

/** `[n, (to, selector, len, ...calldata) × n]` from `offset`: a Cairo 1 multicall. */
function decodeCalls(data: Felt[], offset: number) {
  const at = (i: number) => {
    const v = data[i];
    if (v === undefined) throw new Revert("Failed to deserialize param #1");
    return v;
  };
  const n = Number(at(offset));
  if (n > 64) throw new Revert("Failed to deserialize param #1");
  let i = offset + 1;
  const calls: { to: Felt; selector: Felt; calldata: Felt[] }[] = [];
  for (let k = 0; k < n; k++) {
    const to = at(i);
    const selector = at(i + 1);
    const len = Number(at(i + 2));
    const calldata = data.slice(i + 3, i + 3 + len);
    if (calldata.length !== len) throw new Revert("Failed to deserialize param #1");
    calls.push({ to, selector, calldata });
    i += 3 + len;
  }
  return { calls, next: i };
}

/** `execute_from_outside_v2(outside_execution, signature)` calldata. */
function decodeOutsideExecution(data: Felt[]) {
  if (data.length < 5) throw new Revert("Failed to deserialize param #1");
  const [caller, nonce, after, before] = data as [Felt, Felt, Felt, Felt];
  if (after >= U128 || before >= U128) throw new Revert("Failed to deserialize param #1");
  const { calls, next } = decodeCalls(data, 4);
  const len = Number(data[next] ?? -1n);
  const signature = data.slice(next + 1, next + 1 + len);
  if (len < 0 || signature.length !== len) throw new Revert("Failed to deserialize param #2");
  return { caller, nonce, after, before, calls, signature };
}

function countCalls(inv: Invocation): number {
  return 1 + inv.calls.reduce((n, c) => n + countCalls(c), 0);
}

/** Every event of a call tree, in execution order, with the contract that emitted it. */
function flattenEvents(inv: Invocation): TxRecord["events"] {
  const out: TxRecord["events"] = inv.events.map((e) => ({
    from_address: inv.contract_address,
    keys: e.keys,
    data: e.data,
  }));
  for (const c of inv.calls) out.push(...flattenEvents(c));
  return out;
}
