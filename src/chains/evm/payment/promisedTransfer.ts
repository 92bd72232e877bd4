/**
 * The token movement a settlement promised, and whether a mined receipt
 * carries it. A transaction that was mined without reverting has not paid
 * anything by that alone: a payment succeeded only when its receipt holds
 * the token's `Transfer` it promised. The reconciler (reconcile.ts) and the
 * settle of `batch-settlement` (`TransferCheckedScheme`) ask the same
 * question here.
 *
 * - `exact`, `upto`: the requirements' amount of their asset, from the
 *   payer to their recipient.
 * - `batch-settlement` deposit: the deposit's amount of the channel's token,
 *   into the escrow (from the payer, or from the collector that pulled it).
 * - `batch-settlement` settle: the channel token, from the escrow to the
 *   receiver (what was claimed and not yet paid, more than nothing).
 * - `batch-settlement` refund: the channel token, from the escrow back to
 *   the payer (the unclaimed rest, more than nothing).
 * - A `batch-settlement` claim moves no token (it books vouchers in the
 *   escrow): its receipt's status is its outcome.
 */
import type {
  FacilitatorContext,
  PaymentPayload,
  PaymentRequirements,
  SchemeNetworkFacilitator,
  SettleResponse,
} from "@x402/core/types";
import { BATCH_SETTLEMENT_ADDRESS } from "@x402/evm";
import { parseAbi, parseEventLogs, type Hex, type TransactionReceipt } from "viem";
import { settlePending } from "../../../protocol/answers.js";
import { EvmReason } from "../reasons.js";

const TRANSFER_ABI = parseAbi([
  "event Transfer(address indexed from, address indexed to, uint256 value)",
]);

/** The token movement a payment promised (lowercase addresses). */
export interface PromisedTransfer {
  token: string;
  /** Absent: from anyone (a deposit pulled through a collector). */
  from?: string;
  to: string;
  /** Absent: any amount above zero (what the escrow owed when it ran). */
  value?: bigint;
}

type Fields = Record<string, unknown> | undefined;

const field = (o: Fields, key: string): Fields => {
  const v = o?.[key];
  return v !== null && typeof v === "object" ? (v as Record<string, unknown>) : undefined;
};
const text = (o: Fields, key: string): string | undefined => {
  const v = o?.[key];
  return typeof v === "string" && v.length > 0 ? v : undefined;
};
const lower = (s: string | undefined) => s?.toLowerCase();
const amountOf = (s: string | undefined) => (s && /^\d+$/.test(s) ? BigInt(s) : undefined);

/**
 * What a settlement of this request (`{ paymentPayload, paymentRequirements }`,
 * as stored) must move, or undefined when it moves no token (a
 * `batch-settlement` claim) or the request does not say.
 */
export function promisedTransferOf(request: unknown): PromisedTransfer | undefined {
  const r = request as Fields;
  const req = field(r, "paymentRequirements");
  const inner = field(field(r, "paymentPayload"), "payload");
  const scheme = text(req, "scheme");
  if (scheme === "exact" || scheme === "upto") {
    const from =
      text(field(inner, "authorization"), "from") ??
      text(field(inner, "permit2Authorization"), "from");
    const token = text(req, "asset");
    const to = text(req, "payTo");
    const value = amountOf(text(req, "amount"));
    if (!from || !token || !to || value === undefined) return undefined;
    return { token: token.toLowerCase(), from: from.toLowerCase(), to: to.toLowerCase(), value };
  }
  if (scheme !== "batch-settlement") return undefined;
  const escrow = BATCH_SETTLEMENT_ADDRESS.toLowerCase();
  const channel = field(inner, "channelConfig");
  const channelToken = lower(text(channel, "token"));
  switch (text(inner, "type")) {
    case "deposit": {
      const value = amountOf(text(field(inner, "deposit"), "amount"));
      return channelToken && value !== undefined
        ? { token: channelToken, to: escrow, value }
        : undefined;
    }
    case "settle": {
      const token = lower(text(inner, "token"));
      const receiver = lower(text(inner, "receiver"));
      return token && receiver ? { token, from: escrow, to: receiver } : undefined;
    }
    case "refund": {
      const payer = lower(text(channel, "payer"));
      return channelToken && payer ? { token: channelToken, from: escrow, to: payer } : undefined;
    }
    default:
      return undefined;
  }
}

/** Whether a receipt carries the promised transfer. */
export function carriesTransfer(receipt: TransactionReceipt, expected: PromisedTransfer): boolean {
  const transfers = parseEventLogs({ abi: TRANSFER_ABI, logs: receipt.logs, strict: true });
  return transfers.some(
    (t) =>
      t.address.toLowerCase() === expected.token &&
      (expected.from === undefined || t.args.from.toLowerCase() === expected.from) &&
      t.args.to.toLowerCase() === expected.to &&
      (expected.value === undefined ? t.args.value > 0n : t.args.value === expected.value),
  );
}

/**
 * A mechanism whose successful settle must also have moved the promised
 * tokens: the official `batch-settlement` mechanism calls a settle
 * successful when its transaction's receipt says `success`, which an escrow
 * call that moved nothing (a `settle` whose claimed total another caller paid
 * out first) says too. Its success is checked against the receipt's
 * `Transfer` logs; without them the settle fails, naming the transaction.
 */
export class TransferCheckedScheme implements SchemeNetworkFacilitator {
  readonly scheme: string;
  readonly caipFamily: string;

  constructor(
    private readonly inner: SchemeNetworkFacilitator,
    private readonly receiptOf: (hash: Hex) => Promise<TransactionReceipt>,
  ) {
    this.scheme = inner.scheme;
    this.caipFamily = inner.caipFamily;
  }

  getExtra(network: Parameters<SchemeNetworkFacilitator["getExtra"]>[0]) {
    return this.inner.getExtra(network);
  }

  getSigners(network: string) {
    return this.inner.getSigners(network);
  }

  verify(...args: Parameters<SchemeNetworkFacilitator["verify"]>) {
    return this.inner.verify(...args);
  }

  async settle(
    payload: PaymentPayload,
    requirements: PaymentRequirements,
    context?: FacilitatorContext,
  ): Promise<SettleResponse> {
    const result = await this.inner.settle(payload, requirements, context);
    if (!result.success || !result.transaction) return result;
    const promised = promisedTransferOf({
      paymentPayload: payload,
      paymentRequirements: requirements,
    });
    if (!promised) return result;
    let receipt: TransactionReceipt;
    try {
      receipt = await this.receiptOf(result.transaction as Hex);
    } catch (e) {
      // Mined, but its logs cannot be read now: the reconciler decides.
      return settlePending(
        result.transaction,
        result.network,
        `the transaction was mined but its receipt could not be read to check the transfer: ${e instanceof Error ? e.message : String(e)}`,
        result.payer,
      );
    }
    if (carriesTransfer(receipt, promised)) return result;
    return {
      success: false,
      errorReason: EvmReason.transferMissing,
      errorMessage:
        "the transaction was mined without reverting, but it did not move the tokens the payment promised, so nothing was paid",
      transaction: result.transaction,
      network: result.network,
      ...(result.payer ? { payer: result.payer } : {}),
    };
  }
}
