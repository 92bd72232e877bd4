/**
 * The XRPL `exact` mechanism, registered on the shared `x402Facilitator`.
 * Keyless: the payer signs the whole `Payment` and pays its own fee; we
 * check it, submit the payer's bytes unchanged, and report success only for
 * a validated `tesSUCCESS`.
 *
 * Verify = the offline checks (signedPayment.ts), then the chain: the
 * signing key is the account's enabled master key or its regular key, the
 * sequence (or ticket) is the next usable one, `LastLedgerSequence` lies
 * ahead of the validated ledger and within `maxTimeoutSeconds`, and rippled's
 * `simulate` answers `tesSUCCESS`.
 *
 * Settle = verify again, journal the transaction (its hash and blob, so a
 * crash can be followed up by re-sending exactly it), submit, then follow it
 * until it is validated, or until the validated ledger passes its
 * `LastLedgerSequence` without it (it can never land: a failure), or until
 * the time budget ends (`settlement_pending` with the hash; the reconciler
 * finishes it). It looks again as each validated ledger is announced on
 * rippled's `ledger` stream, or every polling interval while the stream is
 * down (validatedLedgers.ts).
 */
import { deriveAddress } from "xrpl";
import { refusedSettle, settleRefusal, verifyAnswer } from "../../protocol/answers.js";
import type {
  PaymentPayload,
  PaymentRequirements,
  SchemeNetworkFacilitator,
  SettleResponse,
  VerifyResponse,
} from "@x402/core/types";
import { Reason } from "../../protocol/reasons.js";
import type { XrplNetwork } from "./networks.js";
import type { FailureCause, TransactionJournal } from "../ports.js";
import { XrplRpcError, type XrplRpc } from "./rpc.js";
import { XrplReason } from "./reasons.js";
import { checkSignedPayment, type PaymentTx } from "./signedPayment.js";
import type { ValidatedLedgers } from "./validatedLedgers.js";
import type { LedgerOutcomes } from "./ledgerOutcomes.js";

/**
 * Submit results for a payment rippled has just applied to its open ledger
 * or queued: it can land only in a ledger validated after the submission.
 * (`tef…` such as `tefPAST_SEQ` or `tefALREADY` may mean it landed before.)
 */
const APPLIED_NOW = new Set(["tesSUCCESS", "terQUEUED"]);

/** The account flag that disables the master key. */
const LSF_DISABLE_MASTER = 0x00100000;

export interface XrplSchemeSettings {
  maxFeeDrops: bigint;
  /** The shortest time a ledger takes to close; bounds how far ahead `LastLedgerSequence` may lie. */
  minLedgerCloseSeconds: number;
  settleTimeoutMs: number;
}

/** What the chain says of one transaction, looked for in a range of ledgers. */
export type TxStatus =
  | { state: "validated"; result: string; ledgerIndex: number }
  /** Seen (in the open ledger or a queue), not in a validated ledger yet. */
  | { state: "unvalidated" }
  /** In none of the ledgers of the range, and the node searched every one of them. */
  | { state: "missing" }
  /** Not found, but the node does not hold every ledger of the range (yet): nothing follows. */
  | { state: "unknown" };

/** The ledgers a payment can land in: after the one validated when it was checked, up to its LastLedgerSequence. */
export interface LedgerRange {
  first: number;
  last: number;
}

/**
 * rippled searches at most 1000 ledgers for a transaction; a payment that
 * may land further ahead could never be proved missing.
 */
export const MAX_LEDGERS_AHEAD = 1000;

type ChainChecked =
  | {
      ok: true;
      tx: PaymentTx;
      blob: string;
      hash: string;
      payer: string;
      /** The validated ledger when it was checked: the payment lands after it, if at all. */
      validated: number;
    }
  | { ok: false; reason: string; message: string; payer?: string };

/** Engine results that mean the payer's funds, not the payment's shape. */
const RESULT_REASONS: Record<string, string> = {
  tecUNFUNDED_PAYMENT: Reason.insufficientFunds,
  tecUNFUNDED: Reason.insufficientFunds,
  tecPATH_PARTIAL: Reason.insufficientFunds,
  tecINSUFF_FEE: Reason.insufficientFunds,
  terINSUF_FEE_B: Reason.insufficientFunds,
  tecNO_DST: XrplReason.destinationNotFound,
  tecNO_DST_INSUF_XRP: XrplReason.destinationNotFound,
  tecPATH_DRY: XrplReason.noTrustLine,
  tecNO_LINE: XrplReason.noTrustLine,
  tefPAST_SEQ: XrplReason.sequence,
  terPRE_SEQ: XrplReason.sequence,
  tefMAX_LEDGER: XrplReason.expired,
  temBAD_SIGNATURE: XrplReason.signature,
  tefBAD_AUTH: XrplReason.signerNotAuthorized,
  tefBAD_AUTH_MASTER: XrplReason.signerNotAuthorized,
  terNO_ACCOUNT: XrplReason.accountNotFound,
};

export function reasonForResult(result: string, fallback: string): string {
  return RESULT_REASONS[result] ?? fallback;
}

/**
 * Results a validated payment can fail with because of its payer: it moved
 * the funds (XRP below the amount and reserve, an issued balance below the
 * amount) or its fee away after our check. The others (a payTo without a
 * trust line or an account, a path the requirements' asset cannot take)
 * are the requirements'.
 */
const PAYER_RESULTS = new Set([
  "tecUNFUNDED_PAYMENT",
  "tecUNFUNDED",
  "tecPATH_PARTIAL",
  "tecINSUFF_FEE",
  "tecINSUFFICIENT_RESERVE",
]);

/** Who caused a payment that was validated with `result` (not `tesSUCCESS`). */
export function causeOfResult(result: string): FailureCause {
  return PAYER_RESULTS.has(result) ? "payer" : "requirements";
}

export class ExactXrplScheme implements SchemeNetworkFacilitator {
  readonly scheme = "exact";
  readonly caipFamily = "xrpl:*";

  constructor(
    private readonly network: XrplNetwork,
    private readonly rpc: XrplRpc,
    private readonly ledgers: ValidatedLedgers,
    private readonly outcomes: LedgerOutcomes,
    private readonly journal: TransactionJournal,
    private readonly settings: XrplSchemeSettings,
  ) {}

  getExtra(): Record<string, unknown> {
    return { areFeesSponsored: false };
  }

  /** Keyless: the payer signs and pays its own fee, so no account of ours is involved. */
  getSigners(): string[] {
    return [];
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
    const { tx, blob, hash, payer } = checked;
    const range: LedgerRange = { first: checked.validated, last: tx.LastLedgerSequence! };
    await this.journal.sent({
      network: this.network.id,
      reference: hash,
      detail: { blob, firstLedger: range.first, lastLedgerSequence: range.last, account: payer },
    });
    const answer = (fields: Partial<SettleResponse>): SettleResponse => ({
      success: false,
      transaction: hash,
      network,
      payer,
      ...fields,
    });
    // The last validated ledger announced before the payment was submitted:
    // a payment rippled has just applied or queued can land only after it.
    const announcedBefore = this.ledgers.known();
    let preliminary: string;
    try {
      const submitted = await this.rpc.call<{
        engine_result: string;
        engine_result_message?: string;
      }>("submit", { tx_blob: blob, fail_hard: true });
      preliminary = submitted.engine_result;
    } catch {
      // Sent or not, we cannot tell: never a failure. The reconciler asks the
      // ledger by hash, and re-sends these exact bytes while they can land.
      return answer({
        errorReason: Reason.settlementPending,
        errorMessage:
          "the payment was submitted but the node's answer was lost; it is being followed",
      });
    }
    // tem/tef/tel, and tec under fail_hard: rippled refused it and did not
    // apply it. Unless it is already in a ledger (the payer may have
    // submitted these bytes elsewhere: tefPAST_SEQ), it never lands from here.
    if (/^(tem|tef|tel|tec)/.test(preliminary)) {
      const seen = await this.ledgers
        .current()
        .then((validated) => this.status(hash, { first: range.first, last: validated }))
        .catch(() => undefined);
      if (seen?.state === "missing") {
        return settleRefusal(
          {
            reason: reasonForResult(preliminary, XrplReason.transactionFailed),
            message: `the ledger refused the payment (${preliminary}); nothing was transferred`,
            payer,
          },
          network,
        );
      }
    }
    const deadline = Date.now() + this.settings.settleTimeoutMs;
    // The validated ledgers this settle has looked through: with the stream
    // up, each one announced after is looked at once, as it comes. Unknown
    // (a payment that may already be in a ledger, or no stream): ask `tx`.
    let lookedThrough = APPLIED_NOW.has(preliminary) ? announcedBefore : undefined;
    for (;;) {
      // The ledger known before the look: one that closes during it wakes the wait at once.
      const seen = this.ledgers.known();
      const status = await this.lookSince(hash, range, lookedThrough, seen).catch(() => undefined);
      // Not seen in any validated ledger up to `seen`: from here, only newer ones need a look.
      lookedThrough = status?.state === "unvalidated" ? seen : undefined;
      if (status?.state === "validated") return this.finish(hash, status, payer, network);
      // Missing from every ledger up to its LastLedgerSequence: it can never land.
      if (status?.state === "missing") {
        return settleRefusal(
          {
            reason: XrplReason.expired,
            message: `the payment was not validated by ledger ${range.last} (its LastLedgerSequence) and can no longer land; nothing was transferred`,
            payer,
          },
          network,
        );
      }
      if (Date.now() >= deadline) {
        return answer({
          errorReason: Reason.settlementPending,
          errorMessage: "the payment was submitted and is not validated yet; it is being followed",
        });
      }
      // The next validated ledger (by the stream), or the polling interval without it.
      await this.ledgers.waitPast(seen, deadline - Date.now());
    }
  }

  /**
   * Who caused a payment that failed on-chain: the ledger's own result for
   * its transaction (its hash is the signed blob's), read back.
   */
  async failureCause(hash: string): Promise<FailureCause> {
    const r = await this.rpc.call<{
      validated?: boolean;
      meta?: { TransactionResult?: string } | string;
    }>("tx", { transaction: hash, binary: false });
    const result = typeof r.meta === "object" ? r.meta.TransactionResult : undefined;
    return r.validated && result ? causeOfResult(result) : "requirements";
  }

  /** The outcome of a validated transaction, written to the journal. */
  private async finish(
    hash: string,
    status: Extract<TxStatus, { state: "validated" }>,
    payer: string,
    network: SettleResponse["network"],
  ): Promise<SettleResponse> {
    const ok = status.result === "tesSUCCESS";
    await this.journal.finished(hash, ok ? "success" : "reverted", BigInt(status.ledgerIndex));
    if (ok) return { success: true, transaction: hash, network, payer };
    return {
      success: false,
      errorReason: reasonForResult(status.result, XrplReason.transactionFailed),
      errorMessage: `the payment was validated with ${status.result}: only its fee was charged, no amount moved`,
      transaction: hash,
      network,
      payer,
    };
  }

  /**
   * Where a transaction stands, looking only at what was validated since
   * `lookedThrough` when that is one announced ledger (`seen`), or nothing
   * new: every settle woken by a close then shares one read of its ledger
   * (ledgerOutcomes.ts). Anything else is asked of `tx`, which also decides
   * "missing" once the range is over.
   */
  private async lookSince(
    hash: string,
    range: LedgerRange,
    lookedThrough: number | undefined,
    seen: number | undefined,
  ): Promise<TxStatus> {
    if (lookedThrough === undefined || seen === undefined) return this.status(hash, range);
    if (seen === lookedThrough) return { state: "unvalidated" };
    if (seen === lookedThrough + 1) {
      const result = await this.outcomes.outcome(seen, hash);
      if (typeof result === "string") {
        return { state: "validated", result, ledgerIndex: seen };
      }
      if (result === null && seen < range.last) return { state: "unvalidated" };
    }
    return this.status(hash, range);
  }

  /**
   * Where a transaction stands. "Missing" only when rippled searched every
   * ledger of the range (`searched_all`): a node with gaps in its history
   * must never turn a payment that landed into a failure.
   */
  async status(hash: string, range: LedgerRange): Promise<TxStatus> {
    try {
      const r = await this.rpc.call<{
        validated?: boolean;
        ledger_index?: number;
        meta?: { TransactionResult?: string } | string;
      }>("tx", {
        transaction: hash,
        binary: false,
        min_ledger: range.first,
        max_ledger: Math.max(range.first, range.last),
      });
      if (r.validated && typeof r.meta === "object" && r.meta.TransactionResult) {
        return {
          state: "validated",
          result: r.meta.TransactionResult,
          ledgerIndex: r.ledger_index ?? 0,
        };
      }
      return { state: "unvalidated" };
    } catch (e) {
      if (e instanceof XrplRpcError && e.code === "txnNotFound") {
        return e.data["searched_all"] === true ? { state: "missing" } : { state: "unknown" };
      }
      throw e;
    }
  }

  /** The offline checks, then what only the ledger knows. */
  private async check(
    payload: PaymentPayload,
    requirements: PaymentRequirements,
  ): Promise<ChainChecked> {
    const checked = checkSignedPayment(payload, requirements, {
      maxFeeDrops: this.settings.maxFeeDrops,
      networkId: this.network.networkId,
    });
    if (!checked.ok) return checked;
    const { tx, payer } = checked;
    const fail = (reason: string, message: string): ChainChecked => ({
      ok: false,
      reason,
      message,
      payer,
    });

    const validated = await this.ledgers.current();
    const lastLedger = tx.LastLedgerSequence!;
    const maxAhead = Math.min(
      Math.ceil(requirements.maxTimeoutSeconds / this.settings.minLedgerCloseSeconds) + 2,
      MAX_LEDGERS_AHEAD,
    );
    if (lastLedger <= validated) {
      return fail(
        XrplReason.expired,
        `LastLedgerSequence ${lastLedger} has passed (validated ledger ${validated})`,
      );
    }
    if (lastLedger > validated + maxAhead) {
      return fail(
        XrplReason.lastLedger,
        `LastLedgerSequence may be at most ${maxAhead} ledgers ahead of the validated ledger (${validated}), so the payment cannot outlive maxTimeoutSeconds`,
      );
    }

    let account: { Sequence: number; Flags: number; RegularKey?: string };
    try {
      account = (
        await this.rpc.call<{ account_data: typeof account }>("account_info", {
          account: payer,
          ledger_index: "current",
        })
      ).account_data;
    } catch (e) {
      if (e instanceof XrplRpcError && e.code === "actNotFound") {
        return fail(
          XrplReason.accountNotFound,
          `the paying account ${payer} does not exist on the ledger`,
        );
      }
      throw e;
    }
    const signer = deriveAddress(tx.SigningPubKey!);
    const masterOk = signer === payer && (account.Flags & LSF_DISABLE_MASTER) === 0;
    if (!masterOk && signer !== account.RegularKey) {
      return fail(
        XrplReason.signerNotAuthorized,
        signer === payer
          ? "the account's master key is disabled: sign with its regular key"
          : "the signing key is neither the account's master key nor its regular key",
      );
    }
    if (tx.Sequence === 0 && typeof tx.TicketSequence === "number") {
      const objects = await this.rpc.call<{ account_objects: { TicketSequence?: number }[] }>(
        "account_objects",
        { account: payer, type: "ticket", ledger_index: "current", limit: 400 },
      );
      if (!objects.account_objects.some((t) => t.TicketSequence === tx.TicketSequence)) {
        return fail(
          XrplReason.sequence,
          `ticket ${tx.TicketSequence} is not available to ${payer}`,
        );
      }
    } else if (tx.Sequence !== account.Sequence) {
      return fail(
        XrplReason.sequence,
        `Sequence must be the account's next sequence (${account.Sequence}), got ${String(tx.Sequence)}`,
      );
    }

    const { TxnSignature: _signature, ...unsigned } = tx;
    const simulated = await this.rpc.call<{
      engine_result: string;
      engine_result_message?: string;
    }>("simulate", { tx_json: unsigned });
    if (simulated.engine_result !== "tesSUCCESS") {
      return fail(
        reasonForResult(simulated.engine_result, XrplReason.simulationFailed),
        `the ledger would not apply this payment: ${simulated.engine_result}${simulated.engine_result_message ? ` (${simulated.engine_result_message})` : ""}`,
      );
    }
    return { ...checked, validated };
  }
}
