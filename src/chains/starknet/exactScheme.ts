/**
 * The Starknet `exact` mechanism (SNIP-9 v2 outside execution), registered
 * on the shared `x402Facilitator`. The payer signs one USDC `transfer` as
 * SNIP-12 typed data bound to our executor as `Caller`; the executor submits
 * `execute_from_outside_v2` on the payer's account and pays the fee.
 *
 * Verify = the offline checks (outsideExecution.ts), then the chain, each
 * with its own reason: the account is deployed; its `is_valid_signature`
 * answers VALID (or 1) for the SNIP-12 hash of the canonical typed data;
 * the SNIP-9 nonce is unused; the balance covers; and a simulation of the
 * whole `execute_from_outside_v2` call from the executor succeeds with
 * exactly one `Transfer` from the payer, to `payTo`, of the amount. That
 * simulation runs the transaction as it will be sent: signed by the
 * executor, with the resource bounds, tip and nonce the send uses,
 * validated, charged its fee, at the pre-confirmed block. (A first
 * simulation without a signature only sizes the bounds: the payer's account
 * can tell it apart, so nothing is decided on it but a refusal.)
 *
 * Settle = verify again, then send from the executor the payment names
 * (journaled before it leaves), and follow it until it is ACCEPTED_ON_L2 in
 * a block: SUCCEEDED with the expected `Transfer` is success, REVERTED a
 * failure with its reason; past the time budget it is `settlement_pending`
 * with the hash, decided later from the chain. Who caused a revert is read
 * from where it arose, not from its text (`causeOfRevert`).
 */
import { RpcError, outsideExecution, type Call } from "starknet";
import { refusedSettle, settleRefusal, verifyAnswer } from "../../protocol/answers.js";
import type {
  PaymentPayload,
  PaymentRequirements,
  SchemeNetworkFacilitator,
  SettleResponse,
  VerifyResponse,
} from "@x402/core/types";
import { Reason } from "../../protocol/reasons.js";
import type { StarknetNetwork } from "./networks.js";
import type { FailureCause, TransactionJournal } from "../ports.js";
import { rememberBounded } from "../../lib/boundedMap.js";
import type { BlockReceipts, StarknetReceipt } from "./blockReceipts.js";
import type { BlockTicker } from "./blockTicker.js";
import {
  ExecutorRefusal,
  maxFeeOf,
  type ExecutorPool,
  type PreparedTransaction,
  type ResourceBounds,
} from "./executors.js";
import { StarknetReason } from "./reasons.js";
import { causeOfRevert, describeRevert, parseRevert, reasonOfRevert } from "./revertCause.js";
import {
  SIGNATURE_VALID,
  TRANSFER_EVENT_KEY,
  addressHex,
  checkOutsideExecution,
  feltHex,
  parseOutsideExecution,
  signedMessageHash,
  type ParsedOutsideExecution,
} from "./outsideExecution.js";
import { RpcCode, rpcErrorCode, simulateAsSent, type StarknetRpc } from "./rpc.js";

/**
 * The tip a settlement offers: none. The simulation and the send use this
 * same value (a payer's account can read the tip).
 */
const SETTLEMENT_TIP = 0n;

export interface StarknetSchemeSettings {
  skewSeconds: number;
  settleTimeoutMs: number;
  /** The chain's head, watched once for every waiting settle. */
  blocks: BlockTicker;
  /** The latest blocks' receipts, read whole while many settles wait (blockReceipts.ts). */
  receipts?: BlockReceipts;
  /**
   * The most one settlement may cost the executor, in FRI: the sum over the
   * simulation's resource bounds of amount times price. Above it: refused,
   * nothing sent (a payer's account contract is arbitrary code).
   */
  maxFeeFri?: bigint;
  /** What a mined transaction of ours cost, in whole STRK (a metric). */
  onFeePaid?: (status: "success" | "reverted", strk: number) => void;
}

/** What a receipt says the transaction cost, in FRI, when it says so in FRI. */
function feeOf(receipt: { actual_fee?: { amount?: unknown; unit?: unknown } }): bigint | undefined {
  const fee = receipt.actual_fee;
  if (!fee || fee.unit !== "FRI" || fee.amount === undefined) return undefined;
  try {
    return BigInt(String(fee.amount));
  } catch {
    return undefined;
  }
}

/**
 * The most gas of each resource one settlement may reserve, whatever its
 * simulation asks: the payer's account contract is arbitrary code, and its
 * `is_valid_signature` runs inside our transaction, so an account that
 * burns gas there would otherwise raise the bounds we sign, up to the fee
 * ceiling. A settlement is one `execute_from_outside_v2` with one
 * `transfer`. On the local node it consumes 850,000 L2 gas and 192 L1 data
 * gas and no L1 gas, and starknet.js's 1.5 margin makes bounds of 1,275,000
 * and 288. The ceilings allow 12 times those bounds in L2 gas (room for an
 * account whose signature check is far heavier than a Stark-curve one, such
 * as a secp256r1 or multi-signer check) and 7 times in L1 data gas (a few
 * storage writes more). A transfer sends no message to L1 and needs no L1
 * gas, but a node may still quote a little for an invoke; 20,000 lets such
 * a quote through (the fee ceiling bounds what it costs) instead of
 * refusing every payment. Bounds above any of them are refused before
 * anything is sent.
 */
export const RESOURCE_CEILINGS = {
  l2_gas: 15_000_000n,
  l1_data_gas: 2_000n,
  l1_gas: 20_000n,
} as const;

/** The resources whose bounds exceed their ceiling, as `name: amount > ceiling`. */
export function boundsAboveCeilings(bounds: ResourceBounds): string[] {
  const all = bounds as unknown as Record<string, { max_amount: unknown } | undefined>;
  return Object.entries(RESOURCE_CEILINGS).flatMap(([name, ceiling]) => {
    const amount = BigInt(String(all[name]?.max_amount ?? 0));
    return amount > ceiling ? [`${name}: ${amount} > ${ceiling}`] : [];
  });
}

type ChainChecked =
  | {
      ok: true;
      oe: ParsedOutsideExecution;
      payer: string;
      calls: Call[];
      /** The transaction the simulation ran, signed: what the send sends. */
      prepared: PreparedTransaction;
    }
  | { ok: false; reason: string; message: string; payer?: string };

/** An emitted event with the contract that emitted it. */
export interface EmittedEvent {
  from_address: string;
  keys: string[];
  data: string[];
}

export interface ExpectedTransfer {
  asset: bigint;
  from: bigint;
  to: bigint;
  amount: bigint;
}

/** Where a sent transaction stands (`unknown`: the node does not know it). */
type Outcome =
  | { state: "succeeded" }
  | { state: "failed"; reason: string; message: string; cause: FailureCause }
  | { state: "pending" }
  | { state: "unknown" };

/**
 * Whether the events hold exactly one `Transfer` of `asset` sent by the
 * payer, and it is the expected one. Both layouts count: keyed (`keys =
 * [selector, from, to]`, `data = [low, high]`) and legacy (`keys =
 * [selector]`, `data = [from, to, low, high]`). Transfers of the same token
 * by others (the executor's fee, when the asset is STRK) do not count.
 */
export function holdsExpectedTransfer(
  events: readonly EmittedEvent[],
  want: ExpectedTransfer,
): { ok: true } | { ok: false; message: string } {
  const payerSent: { to: bigint; amount: bigint }[] = [];
  for (const ev of events) {
    if (BigInt(ev.from_address) !== want.asset) continue;
    if (ev.keys.length === 0 || BigInt(ev.keys[0]!) !== TRANSFER_EVENT_KEY) continue;
    let fields: bigint[];
    if (ev.keys.length === 3 && ev.data.length === 2) {
      fields = [...ev.keys.slice(1), ...ev.data].map((v) => BigInt(v));
    } else if (ev.keys.length === 1 && ev.data.length === 4) {
      fields = ev.data.map((v) => BigInt(v));
    } else {
      return { ok: false, message: "a Transfer event of the asset has an unknown layout" };
    }
    const [from, to, low, high] = fields as [bigint, bigint, bigint, bigint];
    if (from === want.from) payerSent.push({ to, amount: low + (high << 128n) });
  }
  if (payerSent.length !== 1) {
    return {
      ok: false,
      message: `expected exactly one Transfer from the payer, found ${payerSent.length}`,
    };
  }
  const [t] = payerSent as [{ to: bigint; amount: bigint }];
  if (t.to !== want.to || t.amount !== want.amount) {
    return { ok: false, message: "the payer's Transfer is not to payTo for the amount" };
  }
  return { ok: true };
}

/** A simulation's `execute_invocation`: the call tree, or the revert reason. */
type ExecuteInvocation = { revert_reason?: string } & Record<string, unknown>;

/** The events of a simulated call tree, each with the contract that emitted it, in order. */
function eventsOfTrace(invocation: unknown): EmittedEvent[] {
  const inv = invocation as {
    contract_address: string;
    events?: { keys: string[]; data: string[] }[];
    calls?: unknown[];
  };
  const own = (inv.events ?? []).map((e) => ({
    from_address: inv.contract_address,
    keys: e.keys,
    data: e.data,
  }));
  return [...own, ...(inv.calls ?? []).flatMap(eventsOfTrace)];
}

/** How many recent reverts' causes are kept for attribution (the oldest go first). */
const FAILURES_KEPT = 10_000;

/** Transactions whose fee is remembered as counted: far more than a minute's settles. */
const FEES_REMEMBERED = 10_000;

/** The payer's authorization a revert is remembered by: its account and outside-execution nonce. */
function authorizationOf(from: bigint, nonce: bigint): string {
  return `${addressHex(from)}:${feltHex(nonce)}`;
}

export class ExactStarknetScheme implements SchemeNetworkFacilitator {
  readonly scheme = "exact";
  readonly caipFamily = "starknet:*";

  constructor(
    private readonly network: StarknetNetwork,
    private readonly rpc: StarknetRpc,
    private readonly executors: ExecutorPool,
    private readonly journal: TransactionJournal,
    private readonly settings: StarknetSchemeSettings,
  ) {}

  /** Who caused this process's recent reverts, by the payer's authorization. */
  private readonly failures = new Map<string, FailureCause>();

  /**
   * Who caused a payment that reverted on-chain here: where its revert
   * arose (read when it was accepted on L2; `causeOfRevert`).
   */
  failureCause(payload: PaymentPayload): FailureCause {
    const parsed = parseOutsideExecution(payload);
    const cause = parsed.ok
      ? this.failures.get(authorizationOf(parsed.oe.from, parsed.oe.nonce))
      : undefined;
    return cause ?? "requirements";
  }

  /**
   * Counts a transaction's fee the first time its receipt is decided here.
   * The same receipt is decided again by a settle's retry, the reconciler
   * and the reorg watch; the transaction was paid for once. (A settle that
   * answered `settlement_pending` stopped following it, so its fee is
   * counted when a later look decides it.)
   */
  private report(txHash: string, status: "success" | "reverted", fee: bigint | undefined): void {
    if (fee === undefined || this.feesCounted.has(txHash)) return;
    rememberBounded(this.feesCounted, txHash, true, FEES_REMEMBERED);
    this.settings.onFeePaid?.(status, Number(fee) / 1e18);
  }

  /** Transactions whose fee was counted, newest last. */
  private readonly feesCounted = new Map<string, true>();

  /**
   * The executor to name as `Caller`, in rotation among healthy ones, under
   * both names a client may read it by: `feePayer` (our specification) and
   * `caller` with `areFeesSponsored` (the foundation's merged scheme).
   */
  getExtra(): Record<string, unknown> {
    const executor = this.executors.next();
    return { feePayer: executor, caller: executor, areFeesSponsored: true };
  }

  getSigners(): string[] {
    return this.executors.addresses();
  }

  async verify(
    payload: PaymentPayload,
    requirements: PaymentRequirements,
  ): Promise<VerifyResponse> {
    return verifyAnswer(await this.check(payload, requirements));
  }

  async settle(
    payload: PaymentPayload,
    requirements: PaymentRequirements,
  ): Promise<SettleResponse> {
    const network = this.network.id as SettleResponse["network"];
    const checked = await this.check(payload, requirements);
    if (!checked.ok) return refusedSettle(checked, network);
    const { oe, payer, calls, prepared } = checked;
    // Blocks up to this one are known not to hold the transaction: at first
    // the head before the send, then the head before each look that did not
    // find it accepted.
    let notBefore = this.settings.blocks.known();
    let sent: { hash: string; ambiguous: boolean };
    try {
      sent = await this.executors.send(oe.caller, calls, prepared, {
        payer,
        outsideNonce: feltHex(oe.nonce),
        expected: this.expectedOf(oe, requirements, true),
      });
    } catch (e) {
      if (e instanceof ExecutorRefusal) {
        return settleRefusal({ reason: e.reason, message: e.message, payer }, network);
      }
      throw e;
    }
    const pending = (message: string): SettleResponse => {
      // Its journal entry, still `sent`, keeps its worst fee counted.
      this.executors.finished(sent.hash, false);
      return {
        success: false,
        errorReason: Reason.settlementPending,
        errorMessage: message,
        transaction: sent.hash,
        network,
        payer,
      };
    };
    if (sent.ambiguous) {
      return pending(
        "the transaction was sent but the node's answer was lost; it is being followed",
      );
    }
    const deadline = Date.now() + this.settings.settleTimeoutMs;
    const want = this.expectedOf(oe, requirements, false) as unknown as ExpectedTransfer;
    for (;;) {
      // The head known before the look: a block made during it wakes the wait at once.
      const seen = this.settings.blocks.known();
      const outcome = await this.outcomeSince(sent.hash, want, notBefore, seen).catch(
        () => undefined,
      );
      if (outcome?.state === "pending" || outcome?.state === "unknown") notBefore = seen;
      if (outcome?.state === "succeeded" || outcome?.state === "failed") {
        if (outcome.state === "succeeded")
          return { success: true, transaction: sent.hash, network, payer };
        rememberBounded(
          this.failures,
          authorizationOf(oe.from, oe.nonce),
          outcome.cause,
          FAILURES_KEPT,
        );
        return {
          success: false,
          errorReason: outcome.reason,
          errorMessage: outcome.message,
          transaction: sent.hash,
          network,
          payer,
        };
      }
      if (Date.now() >= deadline) {
        return pending(
          "the transaction was sent and is not accepted on L2 yet; it is being followed",
        );
      }
      await this.settings.blocks.waitPast(seen, deadline - Date.now());
    }
  }

  /** Wakes every settle waiting for a block (the service is stopping). */
  close(): void {
    this.settings.blocks.close();
  }

  /** The transfer a payment makes, as numbers (or as hex for the journal). */
  private expectedOf(oe: ParsedOutsideExecution, req: PaymentRequirements, asHex: boolean) {
    const t = {
      asset: BigInt(req.asset),
      from: oe.from,
      to: BigInt(req.payTo),
      amount: BigInt(req.amount),
    };
    return asHex
      ? {
          asset: feltHex(t.asset),
          from: feltHex(t.from),
          to: feltHex(t.to),
          amount: t.amount.toString(),
        }
      : t;
  }

  /**
   * Where a transaction not in any block up to `after` stands at block
   * `upTo`: from the blocks read whole when every one in between was
   * (blockReceipts.ts), otherwise from the node's receipt.
   */
  private async outcomeSince(
    txHash: string,
    want: ExpectedTransfer,
    after: number | undefined,
    upTo: number | undefined,
  ): Promise<Outcome> {
    const found = this.settings.receipts?.find(txHash, after, upTo);
    if (found === null) return { state: "pending" };
    return found ? this.decide(txHash, found, want) : this.outcome(txHash, want);
  }

  /**
   * Where a sent transaction stands, from the chain: decided only once it is
   * accepted on L2 in a block. Writes the outcome to the journal.
   */
  async outcome(txHash: string, want: ExpectedTransfer): Promise<Outcome> {
    let receipt: StarknetReceipt;
    try {
      receipt = (await this.rpc.ask((p) =>
        p.channel.getTransactionReceipt(txHash),
      )) as typeof receipt;
    } catch (e) {
      if (rpcErrorCode(e) === RpcCode.txnHashNotFound) {
        // Received but not in a block yet, or unknown to the node.
        const status = await this.rpc
          .ask((p) => p.channel.getTransactionStatus(txHash))
          .catch((err: unknown) => {
            if (rpcErrorCode(err) === RpcCode.txnHashNotFound) return undefined;
            throw err;
          });
        return status ? { state: "pending" } : { state: "unknown" };
      }
      throw e;
    }
    return this.decide(txHash, receipt, want);
  }

  /** What a receipt decides: nothing until accepted on L2; then journaled. */
  private async decide(
    txHash: string,
    receipt: StarknetReceipt,
    want: ExpectedTransfer,
  ): Promise<Outcome> {
    const accepted =
      receipt.finality_status === "ACCEPTED_ON_L2" || receipt.finality_status === "ACCEPTED_ON_L1";
    if (!accepted || receipt.block_number === undefined) return { state: "pending" };
    const block = BigInt(receipt.block_number);
    const fee = feeOf(receipt);
    if (receipt.execution_status !== "SUCCEEDED") {
      this.executors.finished(txHash, true, fee);
      this.report(txHash, "reverted", fee);
      const revert = await this.revertOf(txHash, receipt.revert_reason);
      const reason = reasonOfRevert(revert);
      const cause = causeOfRevert(revert, { payer: want.from, asset: want.asset });
      // The cause goes with the entry: any replica, a restarted process and
      // the reconciler read it there.
      await this.journal.finished(txHash, "reverted", block, fee, cause);
      return {
        state: "failed",
        reason: reason === StarknetReason.simulation ? StarknetReason.reverted : reason,
        message: `the transaction reverted (${describeRevert(revert)}): only the executor's fee was spent, no amount moved`,
        cause,
      };
    }
    const held = holdsExpectedTransfer(receipt.events ?? [], want);
    this.executors.finished(txHash, false);
    this.report(txHash, "success", fee);
    await this.journal.finished(txHash, "success", block, fee);
    if (!held.ok) {
      // Nothing reverted to say where it went wrong: charged as before, to the requirements.
      return {
        state: "failed",
        reason: StarknetReason.transferMissing,
        message: held.message,
        cause: "requirements",
      };
    }
    return { state: "succeeded" };
  }

  /**
   * A mined transaction's revert reason with its call frames: the
   * receipt's, or, when it names none, the one its trace gives
   * (`starknet_traceTransaction`).
   */
  private async revertOf(txHash: string, fromReceipt: string | undefined): Promise<string> {
    if (fromReceipt !== undefined && parseRevert(fromReceipt).frames.length > 0) return fromReceipt;
    const traced = await this.rpc
      .ask((p) => p.getTransactionTrace(txHash))
      .then((t) => (t as { execute_invocation?: { revert_reason?: string } }).execute_invocation)
      .catch(() => undefined);
    return traced?.revert_reason ?? fromReceipt ?? "";
  }

  /**
   * The settlement signed as it will be sent (nonce, tip, bounds) and
   * simulated so: validated (the executor's signature checked), its fee
   * charged (the executor's STRK must cover the bounds' maximal fee, as the
   * sequencer checks), at the pre-confirmed block, where the send will
   * land. The payer's account sees in it what it will see on-chain: a
   * signature, these bounds, this tip and nonce. The nonce is the
   * executor's next as this replica counts it, else the node's
   * pre-confirmed one; a count the node has moved past is read again once.
   */
  private async simulateAsSent(
    caller: bigint,
    calls: Call[],
    resourceBounds: ResourceBounds,
    known: bigint | undefined,
  ): Promise<{ prepared: PreparedTransaction; execution: ExecuteInvocation | undefined }> {
    const address = addressHex(caller);
    for (let nonce = known; ; nonce = undefined) {
      const at =
        nonce ?? BigInt(await this.rpc.ask((p) => p.getNonceForAddress(address, "pre_confirmed")));
      const prepared = await this.executors.sign(caller, calls, {
        nonce: at,
        tip: SETTLEMENT_TIP,
        resourceBounds,
      });
      try {
        const [sim] = await this.rpc.ask((p) =>
          simulateAsSent(p, [prepared.body], "pre_confirmed", []),
        );
        return { prepared, execution: sim?.transaction_trace.execute_invocation };
      } catch (e) {
        const stale =
          nonce !== undefined &&
          e instanceof RpcError &&
          e.code === RpcCode.transactionExecutionError &&
          /nonce/i.test(JSON.stringify(e.baseError.data ?? ""));
        if (!stale) throw e;
      }
    }
  }

  /** The offline checks, then what only the chain knows. */
  private async check(
    payload: PaymentPayload,
    requirements: PaymentRequirements,
  ): Promise<ChainChecked> {
    const checked = checkOutsideExecution(payload, requirements, {
      chainId: this.network.chainId,
      executors: new Set(this.executors.addresses().map((a) => BigInt(a))),
      skewSeconds: this.settings.skewSeconds,
      nowSeconds: Math.floor(Date.now() / 1000),
    });
    if (!checked.ok) return checked;
    const { oe, payer } = checked;
    const from = addressHex(oe.from);
    const fail = (reason: string, message: string): ChainChecked => ({
      ok: false,
      reason,
      message,
      payer,
    });
    /** A contract call; the node's contract error comes back as `undefined`. */
    const call = (contractAddress: string, entrypoint: string, calldata: string[]) =>
      this.rpc
        .ask((p) => p.callContract({ contractAddress, entrypoint, calldata }, "latest"))
        .catch((e: unknown) => {
          const code = rpcErrorCode(e);
          if (code === RpcCode.contractError || code === RpcCode.entrypointNotFound)
            return undefined;
          throw e;
        });

    const msgHash = signedMessageHash(payload, oe);
    // Four reads at once, not one after another: is the account deployed,
    // does it accept the signature, is the nonce unused, what does it hold.
    const [deployed, validRead, nonceRead, balanceRead] = await Promise.allSettled([
      this.rpc.ask((p) => p.getClassHashAt(from, "latest")),
      call(from, "is_valid_signature", [
        msgHash,
        String(oe.signature.length),
        ...oe.signature.map(feltHex),
      ]),
      call(from, "is_valid_outside_execution_nonce", [feltHex(oe.nonce)]),
      (async () =>
        (await call(requirements.asset, "balance_of", [from])) ??
        (await call(requirements.asset, "balanceOf", [from])))(),
    ]);
    if (deployed.status === "rejected") {
      if (rpcErrorCode(deployed.reason) === RpcCode.contractNotFound) {
        return fail(
          StarknetReason.accountNotDeployed,
          `the paying account ${from} is not deployed: deploy it before paying`,
        );
      }
      throw deployed.reason;
    }
    const settledValue = <T>(r: PromiseSettledResult<T>): T => {
      if (r.status === "rejected") throw r.reason;
      return r.value;
    };
    const valid = settledValue(validRead);
    const nonceFree = settledValue(nonceRead);
    const balance = settledValue(balanceRead);
    const answer = valid?.[0] === undefined ? undefined : BigInt(valid[0]);
    if (answer !== SIGNATURE_VALID && answer !== 1n) {
      return fail(
        StarknetReason.signature,
        "the account's is_valid_signature does not accept this signature over the canonical typed data",
      );
    }
    if (nonceFree?.[0] === undefined || BigInt(nonceFree[0]) === 0n) {
      return fail(
        StarknetReason.nonceUsed,
        "the outside execution's nonce was already used (or the account is not a SNIP-9 v2 account)",
      );
    }
    const amount = BigInt(requirements.amount);
    if (!balance || balance.length < 2) {
      return fail(
        Reason.invalidPaymentRequirements,
        `${requirements.asset} answers neither balance_of nor balanceOf: is it a SNIP-2 token?`,
      );
    }
    if (BigInt(balance[0]!) + (BigInt(balance[1]!) << 128n) < amount) {
      return fail(
        Reason.insufficientFunds,
        `the payer holds less than ${requirements.amount} of ${requirements.asset}`,
      );
    }

    const executor = this.executors.accountOf(oe.caller)!;
    const calls = outsideExecution.buildExecuteFromOutsideCall({
      outsideExecution: {
        caller: feltHex(oe.caller),
        nonce: feltHex(oe.nonce),
        execute_after: feltHex(oe.executeAfter),
        execute_before: feltHex(oe.executeBefore),
        calls: oe.calls.map((c) => ({
          to: feltHex(c.to),
          selector: feltHex(c.selector),
          calldata: c.calldata.map(feltHex),
        })),
      },
      signature: oe.signature.map(feltHex),
      signerAddress: from,
      version: "2",
    });
    // The executor's own count of its nonce, when it has one: one call fewer
    // per payment.
    const known = this.executors.knownNonce(oe.caller);
    const simulationFailed = (e: unknown): ChainChecked | undefined =>
      rpcErrorCode(e) === RpcCode.transactionExecutionError
        ? fail(
            StarknetReason.simulation,
            `the settlement would fail: ${(e as Error).message.split("\n").pop()?.trim()}`,
          )
        : undefined;
    // Sizing: a simulation without a signature or bounds gives the resource
    // bounds to sign. It decides nothing but a refusal: the payer's account
    // can tell it from the transaction as sent.
    let sized;
    try {
      sized = await this.rpc.ask(() =>
        executor.simulateTransaction([{ type: "INVOKE", payload: calls }], {
          tip: SETTLEMENT_TIP,
          skipValidate: true,
          ...(known === undefined ? {} : { nonce: known }),
        }),
      );
    } catch (e) {
      const refused = simulationFailed(e);
      if (refused) return refused;
      throw e;
    }
    const sizing = sized.simulated_transactions[0];
    const sizingRun = (
      sizing?.transaction_trace as { execute_invocation?: { revert_reason?: string } } | undefined
    )?.execute_invocation;
    if (!sizing || !sizingRun || sizingRun.revert_reason !== undefined) {
      const revert = sizingRun?.revert_reason ?? "no trace";
      return fail(
        reasonOfRevert(revert),
        `a simulation of the settlement reverts: ${describeRevert(revert)}`,
      );
    }
    const bounds = sizing.resourceBounds;
    const above = boundsAboveCeilings(bounds);
    if (above.length > 0) {
      return fail(
        StarknetReason.feeTooHigh,
        `the settlement's simulation asks for more gas than a payment may use (${above.join(", ")}): the payer's account spends too much checking its signature; nothing was sent`,
      );
    }
    const ceiling = this.settings.maxFeeFri;
    const fee = maxFeeOf(bounds);
    if (ceiling !== undefined && fee > ceiling) {
      return fail(
        StarknetReason.feeTooHigh,
        `the settlement could cost up to ${fee} FRI, above the ceiling of ${ceiling} per transaction (STARKNET_MAX_FEE_STRK); nothing was sent`,
      );
    }
    // The decision: the transaction as it will be sent.
    let asSent;
    try {
      asSent = await this.simulateAsSent(oe.caller, calls, bounds, known);
    } catch (e) {
      // An execution error here is the executor's own transaction refused
      // before the payer's account runs (its validation, its nonce, its
      // fee); one for its STRK is ours to fix, not the payment's.
      if (
        e instanceof RpcError &&
        e.code === RpcCode.transactionExecutionError &&
        /exceed balance|insufficient/i.test(JSON.stringify(e.baseError.data ?? ""))
      ) {
        return fail(
          Reason.noSignerAvailable,
          `the executor ${addressHex(oe.caller)} cannot cover the settlement's maximal fee (${fee} FRI) in STRK; nothing was sent`,
        );
      }
      const refused = simulationFailed(e);
      if (refused) return refused;
      throw e;
    }
    const { prepared, execution } = asSent;
    if (!execution || execution.revert_reason !== undefined) {
      const revert = execution?.revert_reason ?? "no trace";
      return fail(
        reasonOfRevert(revert),
        `a simulation of the settlement as it will be sent reverts: ${describeRevert(revert)}`,
      );
    }
    const held = holdsExpectedTransfer(eventsOfTrace(execution), {
      asset: BigInt(requirements.asset),
      from: oe.from,
      to: BigInt(requirements.payTo),
      amount,
    });
    if (!held.ok)
      return fail(StarknetReason.simulation, `a simulation of the settlement: ${held.message}`);
    return { ok: true, oe, payer, calls, prepared };
  }
}
