/**
 * The NEAR `exact` mechanism, registered on the shared `x402Facilitator`.
 * The payer signs an NEP-366 delegate action holding one `ft_transfer`; one
 * of our relayers wraps it in a transaction to the payer's account and pays
 * the gas and the 1 yoctoNEAR deposit.
 *
 * Verify = the offline checks (signedDelegate.ts), then the chain at final
 * finality: `max_block_height` ahead of the final block and within
 * `maxTimeoutSeconds`, the payer's account and a full-access key whose nonce
 * is below the delegate's, the payer's token balance, and the recipient's
 * storage registration on the token (NEP-145). An unregistered recipient is
 * refused, never registered at our cost: any API key could otherwise make
 * the relayers pay 0.00125 NEAR for arbitrary accounts, and the token
 * would refuse the transfer anyway.
 *
 * Settle = verify again, relay (journaled before it leaves), then follow the
 * transaction until it is final: success only when no receipt failed and the
 * token contract's receipt returned a value. Past the time budget:
 * `settlement_pending` with the hash; a retry or the reconciler decides.
 */
import { refusedSettle, verifyAnswer } from "../../protocol/answers.js";
import type {
  PaymentPayload,
  PaymentRequirements,
  SchemeNetworkFacilitator,
  SettleResponse,
  VerifyResponse,
} from "@x402/core/types";
import { Reason } from "../../protocol/reasons.js";
import type { NearNetwork } from "./networks.js";
import type { FailureCause, TransactionJournal } from "../ports.js";
import { rememberBounded } from "../../lib/boundedMap.js";
import type { NearRelayers } from "./relayers.js";
import { NearRpcError, type NearRpc } from "./rpc.js";
import { NearReason } from "./reasons.js";
import {
  checkSignedDelegate,
  decodeDelegate,
  delegateFingerprint,
  type DecodedDelegate,
} from "./signedDelegate.js";

/**
 * Failures a payer causes after our check: it moved its tokens away, or
 * deleted or changed the key that signed it. The others are not the
 * payer's: an expired delegate, a recipient not registered with the token, a
 * token that fails, and a nonce already used. Anyone holding the signed
 * delegate (the merchant, any relayer) may submit it first, and it then
 * paid `payTo` all the same, so a used nonce is no proof against the payer.
 */
const PAYER_REASONS: ReadonlySet<string> = new Set([
  Reason.insufficientFunds,
  NearReason.accessKey,
  NearReason.signature,
]);

/** Who caused a final failure, by the reason it was given. */
export function causeOfNearFailure(reason: string): FailureCause {
  return PAYER_REASONS.has(reason) ? "payer" : "requirements";
}

/** How many recent failures' causes are kept for attribution (the oldest go first). */
const FAILURES_KEPT = 10_000;

export interface NearSchemeSettings {
  minGas: bigint;
  maxGas: bigint;
  /** The fastest block time assumed when bounding `max_block_height` by `maxTimeoutSeconds`. */
  minBlockSeconds: number;
  settleTimeoutMs: number;
  pollMs: number;
}

/** The final block, as the checks and the relayers read it. */
export interface FinalBlock {
  height: bigint;
  hash: Uint8Array;
}

type ExecutionStatus = { SuccessValue?: string; SuccessReceiptId?: string; Failure?: unknown };

interface ReceiptOutcome {
  id: string;
  block_hash: string;
  outcome: { executor_id: string; status: ExecutionStatus; logs: string[]; tokens_burnt?: string };
}

/** What `tx` answers for a transaction the node knows. */
interface TxView {
  final_execution_status?: string;
  status?: ExecutionStatus;
  receipts_outcome?: ReceiptOutcome[];
  transaction_outcome?: { block_hash: string; outcome?: { tokens_burnt?: string } };
}

/** What a final transaction burnt (yoctoNEAR): its conversion and every receipt's gas. */
function burntOf(view: TxView): bigint {
  const burnt = (text: string | undefined) => (text && /^\d+$/.test(text) ? BigInt(text) : 0n);
  return (view.receipts_outcome ?? []).reduce(
    (sum, r) => sum + burnt(r.outcome.tokens_burnt),
    burnt(view.transaction_outcome?.outcome?.tokens_burnt),
  );
}

/** Where a relayed transaction stands. */
export type TxStatus =
  | { state: "final"; ok: true; fee: bigint }
  | { state: "final"; ok: false; reason: string; message: string; fee: bigint }
  /** Known to the node, not final yet. */
  | { state: "waiting" }
  /** Unknown to the node. */
  | { state: "unknown" };

type ChainChecked =
  | { ok: true; delegate: DecodedDelegate; payer: string; final: FinalBlock }
  | { ok: false; reason: string; message: string; payer?: string };

/** The longest single wait for finality asked of the node (nearcore answers TIMEOUT_ERROR after about 10 s). */
const MAX_WAIT_MS = 15_000;

/** Blocks NEAR may lag between a client's node and ours. */
const HEIGHT_MARGIN = 2n;

/** What a failed receipt means for the payer, from the error nearcore reports. */
function reasonForFailure(failure: unknown): { reason: string; message: string } {
  const text = JSON.stringify(failure);
  const pick = (reason: string, message: string) => ({ reason, message: `${message}: ${text}` });
  if (text.includes("DelegateActionExpired"))
    return pick(NearReason.expired, "the delegate action expired before it ran");
  if (text.includes("DelegateActionInvalidNonce") || text.includes("DelegateActionNonceTooLarge"))
    return pick(NearReason.nonce, "the delegate action's nonce was already used");
  if (text.includes("DelegateActionInvalidSignature"))
    return pick(NearReason.signature, "the chain refused the signature");
  if (text.includes("DelegateActionAccessKeyError"))
    return pick(NearReason.accessKey, "the signing key may not do this");
  if (text.includes("enough balance"))
    return pick(Reason.insufficientFunds, "the payer's token balance was too low");
  if (text.includes("is not registered"))
    return pick(NearReason.recipientNotRegistered, "an account is not registered with the token");
  return pick(NearReason.transactionFailed, "the transfer failed on-chain; nothing moved");
}

/**
 * Decides a final transaction: a failure anywhere (the outer status, or any
 * receipt: a failing `ft_transfer` leaves the outer status a success) is a
 * failure; success needs the token contract's own receipt to succeed.
 */
function judgeOutcome(view: TxView, asset: string): TxStatus {
  const fee = burntOf(view);
  if (view.status?.Failure !== undefined)
    return { state: "final", ok: false, fee, ...reasonForFailure(view.status.Failure) };
  const receipts = view.receipts_outcome ?? [];
  const failed = receipts.find((r) => r.outcome.status.Failure !== undefined);
  if (failed)
    return { state: "final", ok: false, fee, ...reasonForFailure(failed.outcome.status.Failure) };
  const token = receipts.find((r) => r.outcome.executor_id === asset);
  if (token && token.outcome.status.SuccessValue !== undefined)
    return { state: "final", ok: true, fee };
  return {
    state: "final",
    ok: false,
    fee,
    reason: NearReason.transactionFailed,
    message:
      "the transaction is final but the token contract never ran the transfer; nothing moved",
  };
}

export class ExactNearScheme implements SchemeNetworkFacilitator {
  readonly scheme = "exact";
  readonly caipFamily = "near:*";

  constructor(
    private readonly network: NearNetwork,
    private readonly rpc: NearRpc,
    private readonly relayers: NearRelayers,
    private readonly finalBlock: () => Promise<FinalBlock>,
    private readonly journal: TransactionJournal,
    private readonly settings: NearSchemeSettings,
  ) {}

  /**
   * The reasons of this process's recent on-chain failures, by the
   * delegate's fingerprint: the settle's own attribution may run before its
   * journal entry, which carries the cause for everyone else, is written.
   */
  private readonly failures = new Map<string, string>();

  /**
   * Who caused a payment that failed on-chain here: the failure nearcore
   * reported for its receipt (read when it became final).
   */
  failureCause(payload: PaymentPayload): FailureCause {
    const delegate = decodeDelegate(payload);
    const reason = delegate ? this.failures.get(delegateFingerprint(delegate)) : undefined;
    return reason !== undefined ? causeOfNearFailure(reason) : "requirements";
  }

  getExtra(): Record<string, unknown> | undefined {
    return undefined;
  }

  getSigners(): string[] {
    return this.relayers.accounts();
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
    const { delegate, payer } = checked;
    const relayed = await this.relayers.relay(delegate, checked.final.hash, {
      payer,
      publicKey: delegate.publicKey.toString(),
      delegateNonce: delegate.nonce.toString(),
      maxBlockHeight: delegate.maxBlockHeight.toString(),
      asset: requirements.asset,
      delegate: delegateFingerprint(delegate),
    });
    const answer = (fields: Partial<SettleResponse>): SettleResponse => ({
      success: false,
      transaction: relayed.hash,
      network,
      payer,
      ...fields,
    });
    const deadline = Date.now() + this.settings.settleTimeoutMs;
    for (;;) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) {
        // Its journal entry, still `sent`, keeps its worst fee counted.
        this.relayers.finished(relayed.hash, "unfollowed");
        return answer({
          errorReason: Reason.settlementPending,
          errorMessage: relayed.ambiguous
            ? "the payment was relayed but the node's answer was lost; it is being followed"
            : "the payment was relayed and is not final yet; it is being followed",
        });
      }
      const asked = Date.now();
      // One long poll per settle: the node answers when the transaction is
      // final (or at its own timeout), so waiting costs no repeated reads.
      const status = await this.status(relayed.hash, relayed.relayer, requirements.asset, {
        waitMs: Math.min(remaining, MAX_WAIT_MS),
      }).catch(() => undefined);
      if (status?.state === "final") {
        if (!status.ok) {
          rememberBounded(
            this.failures,
            delegateFingerprint(delegate),
            status.reason,
            FAILURES_KEPT,
          );
        }
        const ended = status.ok ? "success" : "reverted";
        this.relayers.finished(relayed.hash, ended, status.fee);
        // The cause goes with the entry: any replica, a restarted process and
        // the reconciler read it there (the map above answers only this
        // process, before the entry is written with the outcome).
        const cause = status.ok ? undefined : causeOfNearFailure(status.reason);
        await this.journal.finished(relayed.hash, ended, undefined, status.fee, cause);
        return status.ok
          ? { success: true, transaction: relayed.hash, network, payer }
          : answer({ errorReason: status.reason, errorMessage: status.message });
      }
      // Not known yet, or the node failed at once: do not ask again at once.
      const elapsed = Date.now() - asked;
      if (elapsed < this.settings.pollMs) {
        await new Promise((r) =>
          setTimeout(r, Math.min(this.settings.pollMs - elapsed, remaining)),
        );
      }
    }
  }

  /** Where a relayed transaction stands, from the node. */
  async status(
    hash: string,
    relayer: string,
    asset: string,
    opts: { waitMs?: number } = {},
  ): Promise<TxStatus> {
    let view: TxView;
    try {
      view = await this.rpc.call<TxView>(
        "tx",
        { tx_hash: hash, sender_account_id: relayer, wait_until: opts.waitMs ? "FINAL" : "NONE" },
        opts.waitMs,
      );
    } catch (e) {
      if (e instanceof NearRpcError && e.causeName === "UNKNOWN_TRANSACTION")
        return { state: "unknown" };
      throw e;
    }
    if (view.final_execution_status !== "FINAL" || !view.receipts_outcome)
      return { state: "waiting" };
    return judgeOutcome(view, asset);
  }

  /** The offline checks, then what only the chain knows, read at final finality. */
  private async check(
    payload: PaymentPayload,
    requirements: PaymentRequirements,
  ): Promise<ChainChecked> {
    const offline = checkSignedDelegate(payload, requirements, {
      relayers: new Set(this.relayers.accounts()),
      minGas: this.settings.minGas,
      maxGas: this.settings.maxGas,
    });
    if (!offline.ok) return offline;
    const { delegate, payer } = offline;
    const fail = (reason: string, message: string): ChainChecked => ({
      ok: false,
      reason,
      message,
      payer,
    });

    const final = await this.finalBlock();
    const ahead = delegate.maxBlockHeight - final.height;
    const allowed =
      BigInt(
        Math.max(1, Math.ceil(requirements.maxTimeoutSeconds / this.settings.minBlockSeconds)),
      ) + HEIGHT_MARGIN;
    if (ahead <= 0n) {
      return fail(
        NearReason.expired,
        `max_block_height ${delegate.maxBlockHeight} has passed (final block ${final.height})`,
      );
    }
    if (ahead > allowed) {
      return fail(
        NearReason.maxBlockHeight,
        `max_block_height may be at most ${allowed} blocks past the final block (${final.height}), so the payment cannot outlive maxTimeoutSeconds`,
      );
    }
    // The chain bounds a nonce by the height it lands at; the final height is a safe floor.
    if (delegate.nonce >= final.height * 1_000_000n) {
      return fail(
        NearReason.nonce,
        "the delegate action's nonce is above what the chain accepts at this height",
      );
    }

    // view_access_key also answers UNKNOWN_ACCOUNT for a missing account, so
    // one read tells both; the three reads go out at once.
    const [key, balance, storage] = await Promise.all([
      this.rpc
        .query<{ nonce: number | string; permission: unknown }>("view_access_key", {
          account_id: payer,
          public_key: delegate.publicKey.toString(),
        })
        .catch((e: unknown) => {
          if (e instanceof NearRpcError && e.causeName === "UNKNOWN_ACCOUNT") return NO_ACCOUNT;
          if (e instanceof NearRpcError && e.causeName === "UNKNOWN_ACCESS_KEY") return undefined;
          throw e;
        }),
      this.rpc
        .view<string>(requirements.asset, "ft_balance_of", { account_id: payer })
        .catch(tokenMissing),
      this.rpc
        .view<unknown>(requirements.asset, "storage_balance_of", { account_id: requirements.payTo })
        .catch(tokenMissing),
    ]);
    if (key === NO_ACCOUNT) {
      return fail(NearReason.accountNotFound, `the paying account ${payer} does not exist`);
    }
    if (!key) {
      return fail(
        NearReason.accessKey,
        `${delegate.publicKey.toString()} is not an access key of ${payer}`,
      );
    }
    if (key.permission !== "FullAccess") {
      return fail(
        NearReason.accessKey,
        "the delegate action must be signed with a full-access key: a function-call key cannot attach the 1 yoctoNEAR deposit",
      );
    }
    if (delegate.nonce <= BigInt(key.nonce)) {
      return fail(
        NearReason.nonce,
        `the delegate action's nonce must be above the key's current nonce (${key.nonce})`,
      );
    }
    if (balance === TOKEN_MISSING || storage === TOKEN_MISSING) {
      return fail(
        NearReason.asset,
        `${requirements.asset} is not a token contract on ${this.network.id}`,
      );
    }
    if (
      typeof balance !== "string" ||
      !/^\d+$/.test(balance) ||
      BigInt(balance) < BigInt(requirements.amount)
    ) {
      return fail(
        Reason.insufficientFunds,
        `${payer} holds ${String(balance)} of the token, less than ${requirements.amount}`,
      );
    }
    if (storage === null || storage === undefined) {
      return fail(
        NearReason.recipientNotRegistered,
        `the recipient ${requirements.payTo} is not registered with the token (NEP-145): it must call storage_deposit once before it can be paid`,
      );
    }
    return { ok: true, delegate, payer, final };
  }
}

const TOKEN_MISSING = Symbol("token missing");
const NO_ACCOUNT = Symbol("no such account");

function tokenMissing(e: unknown): typeof TOKEN_MISSING {
  if (
    e instanceof NearRpcError &&
    (e.causeName === "NO_CONTRACT_CODE" ||
      e.causeName === "UNKNOWN_ACCOUNT" ||
      e.causeName === "CONTRACT_EXECUTION_ERROR")
  ) {
    return TOKEN_MISSING;
  }
  throw e;
}
