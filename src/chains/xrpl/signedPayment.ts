/**
 * Everything about an XRPL `exact` payment that can be decided from the
 * signed blob and the requirements alone, with the `xrpl` package doing every
 * decode and hash and deciding every signature (signature.ts checks it
 * natively first). Chain state (sequence, keys, balances) is checked
 * elsewhere.
 *
 * Which fields bind a payment to a resource server's invoice: `InvoiceID`
 * (SHA-256 of `extra.invoiceId`, as the foundation client sets it) or a memo
 * whose `MemoData` is the invoice id in hex (as the t54 SDK adds). When
 * `extra.invoiceId` is set, at least one must be present and every one
 * present must match.
 */
import { createHash } from "node:crypto";
import BigNumber from "bignumber.js";
import { decode } from "xrpl";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { XrplReason } from "./reasons.js";
import { signatureVerifies } from "./signature.js";

/** rippled's partial-payment flag: an amount that may deliver less. */
const TF_PARTIAL_PAYMENT = 0x00020000;
const CANONICAL_KEY = /^(02|03)[0-9A-F]{64}$|^ED[0-9A-F]{64}$/;
const DROPS = /^[1-9]\d{0,17}$/;
const DECIMAL = /^\d{1,30}(\.\d{1,30})?$/;

interface IssuedAmount {
  currency: string;
  issuer: string;
  value: string;
}

/** The decoded transaction, as far as these checks read it. */
export interface PaymentTx {
  TransactionType: string;
  Account: string;
  Destination?: string;
  DestinationTag?: number;
  Amount?: string | IssuedAmount;
  SendMax?: string | IssuedAmount;
  DeliverMin?: unknown;
  Paths?: unknown;
  Flags?: number;
  Fee?: string;
  Sequence?: number;
  TicketSequence?: number;
  LastLedgerSequence?: number;
  NetworkID?: number;
  SigningPubKey?: string;
  TxnSignature?: string;
  Signers?: unknown;
  Delegate?: string;
  InvoiceID?: string;
  Memos?: { Memo: { MemoData?: string; MemoType?: string; MemoFormat?: string } }[];
}

export type Checked =
  | { ok: true; tx: PaymentTx; blob: string; hash: string; payer: string }
  | { ok: false; reason: string; message: string; payer?: string };

const fail = (reason: string, message: string, payer?: string): Checked => ({
  ok: false,
  reason,
  message,
  ...(payer ? { payer } : {}),
});

/** A signed Payment is a few hundred bytes; anything past this is not one. */
const MAX_BLOB_HEX = 4096;

/** The hex blob a payload carries, or undefined when it has none (or one too long to be a payment). */
export function signedBlobOf(payload: PaymentPayload): string | undefined {
  const blob = (payload.payload as Record<string, unknown> | undefined)?.["signedTxBlob"];
  return typeof blob === "string" &&
    blob.length <= MAX_BLOB_HEX &&
    /^[0-9A-Fa-f]+$/.test(blob) &&
    blob.length % 2 === 0
    ? blob.toUpperCase()
    : undefined;
}

/**
 * Each payment's decoded transaction and id, by its blob. The edge, the
 * verify and the settle read different copies of one payload, and decoding
 * (and the `xrpl` package's `hashSignedTx`, which decodes the blob again to
 * check that it is signed) was a fifth of a settle's CPU when each decoded
 * it for itself. Bounded, the oldest entry out first: the copies of one
 * payment are read within one request, while at most a few hundred others
 * are in flight, and any blob can be decoded again. A blob is at most 4 KB,
 * so the bound also caps what junk payloads can hold (about 4 MB of keys).
 */
const byBlob = new Map<string, DecodedPayment | null>();
const KEEP_DECODED = 1024;

interface DecodedPayment {
  tx: PaymentTx;
  /** The transaction's id, or undefined when it carries no signature (nothing to hash). */
  id: string | undefined;
}

/** rippled's prefix of a transaction id's hash input: "TXN" and a zero byte. */
const TRANSACTION_ID_PREFIX = Buffer.from("54584E00", "hex");

/**
 * A signed transaction's id: the first half of the SHA-512 of the prefix and
 * the blob, as `hashes.hashSignedTx` computes it, from the blob already
 * decoded here.
 */
function transactionId(blob: string): string {
  return createHash("sha512")
    .update(TRANSACTION_ID_PREFIX)
    .update(Buffer.from(blob, "hex"))
    .digest()
    .subarray(0, 32)
    .toString("hex")
    .toUpperCase();
}

function decodedBlob(blob: string): DecodedPayment | null {
  const known = byBlob.get(blob);
  if (known !== undefined) return known;
  let decoded: DecodedPayment | null = null;
  try {
    const tx = decode(blob) as unknown as PaymentTx;
    // `hashSignedTx` refuses to hash a transaction with no signature of any kind.
    const signed =
      tx.TxnSignature !== undefined || tx.Signers !== undefined || tx.SigningPubKey !== undefined;
    decoded = { tx, id: signed ? transactionId(blob) : undefined };
  } catch {
    decoded = null;
  }
  byBlob.set(blob, decoded);
  if (byBlob.size > KEEP_DECODED) byBlob.delete(byBlob.keys().next().value!);
  return decoded;
}

/** The decoded transaction (shared: read it, never change it). */
export function decodePayment(payload: PaymentPayload): PaymentTx | undefined {
  const blob = signedBlobOf(payload);
  return blob ? (decodedBlob(blob)?.tx ?? undefined) : undefined;
}

/** The signed transaction's hash: the same for every copy of one payment. */
export function paymentHash(payload: PaymentPayload): string | undefined {
  const blob = signedBlobOf(payload);
  return blob ? decodedBlob(blob)?.id : undefined;
}

export interface RequiredAsset {
  kind: "native" | "issued";
  currency?: string;
  issuer?: string;
}

/** What the requirements ask for: XRP in drops, or an issued currency with its issuer. */
export function requiredAsset(requirements: PaymentRequirements): RequiredAsset | string {
  if (requirements.asset === "XRP") {
    if (!DROPS.test(requirements.amount)) {
      return "paymentRequirements.amount must be a whole number of drops for XRP";
    }
    return { kind: "native" };
  }
  const issuer = requirements.extra?.["issuer"];
  if (!/^[A-Z0-9]{3}$|^[0-9A-F]{40}$/.test(requirements.asset) || typeof issuer !== "string") {
    return 'paymentRequirements.asset must be "XRP", or a currency code (3 characters or 40 hex digits) with extra.issuer';
  }
  if (!DECIMAL.test(requirements.amount) || new BigNumber(requirements.amount).lte(0)) {
    return "paymentRequirements.amount must be a positive decimal value for an issued currency";
  }
  return { kind: "issued", currency: requirements.asset, issuer };
}

/** The SHA-256 of an invoice id, as `InvoiceID` carries it. */
export function invoiceHash(invoiceId: string): string {
  return createHash("sha256").update(invoiceId).digest("hex").toUpperCase();
}

export interface StaticLimits {
  maxFeeDrops: bigint;
  /** The network id transactions must carry (only above 1024, as rippled requires). */
  networkId: number;
}

/** Every check that needs no chain read, in the order a payer would fix them. */
export function checkSignedPayment(
  payload: PaymentPayload,
  requirements: PaymentRequirements,
  limits: StaticLimits,
): Checked {
  const blob = signedBlobOf(payload);
  if (!blob)
    return fail(XrplReason.payload, "payload.signedTxBlob must be the signed transaction in hex");
  const decoded = decodedBlob(blob);
  if (!decoded)
    return fail(XrplReason.payload, "payload.signedTxBlob does not decode as an XRPL transaction");
  const { tx, id } = decoded;
  const payer = typeof tx.Account === "string" ? tx.Account : undefined;
  if (tx.TransactionType !== "Payment") {
    return fail(
      XrplReason.transactionType,
      `the transaction is a ${tx.TransactionType}, not a Payment`,
      payer,
    );
  }
  if (tx.Signers !== undefined || tx.SigningPubKey === "") {
    return fail(
      XrplReason.multisigned,
      "multi-signed payments are not accepted: sign with one key",
      payer,
    );
  }
  if (typeof tx.SigningPubKey !== "string" || !CANONICAL_KEY.test(tx.SigningPubKey)) {
    return fail(
      XrplReason.signingKey,
      "SigningPubKey is not a canonical secp256k1 or Ed25519 public key",
      payer,
    );
  }
  if (!signatureVerifies(tx as unknown as Parameters<typeof signatureVerifies>[0], blob))
    return fail(XrplReason.signature, "TxnSignature does not verify for SigningPubKey", payer);
  if (tx.Delegate !== undefined) {
    return fail(XrplReason.delegate, "payments sent by a delegate are not accepted", payer);
  }
  if (limits.networkId <= 1024 ? tx.NetworkID !== undefined : tx.NetworkID !== limits.networkId) {
    return fail(
      XrplReason.networkId,
      limits.networkId <= 1024
        ? `NetworkID must be absent on network ${limits.networkId}`
        : `NetworkID must be ${limits.networkId}`,
      payer,
    );
  }
  if (tx.Destination !== requirements.payTo) {
    return fail(XrplReason.destination, `Destination must be payTo (${requirements.payTo})`, payer);
  }
  const wantTag = requirements.extra?.["destinationTag"];
  if (wantTag !== undefined && tx.DestinationTag !== Number(wantTag)) {
    return fail(XrplReason.destinationTag, `DestinationTag must be ${String(wantTag)}`, payer);
  }
  const amountError = checkAmount(tx, requirements);
  if (amountError) return fail(amountError.reason, amountError.message, payer);
  if (!tx.Fee || !DROPS.test(tx.Fee) || BigInt(tx.Fee) > limits.maxFeeDrops) {
    return fail(XrplReason.feeTooHigh, `Fee must be at most ${limits.maxFeeDrops} drops`, payer);
  }
  if (typeof tx.LastLedgerSequence !== "number") {
    return fail(
      XrplReason.lastLedger,
      "LastLedgerSequence must be set, so the payment cannot wait forever",
      payer,
    );
  }
  const invoiceError = checkInvoice(tx, requirements);
  if (invoiceError) return fail(XrplReason.invoice, invoiceError, payer);
  // A canonical SigningPubKey was required above, so there is always an id;
  // were there none, nothing could be journaled for it, so nothing is sent.
  if (!id) return fail(XrplReason.signature, "the transaction carries no signature", payer);
  return { ok: true, tx, blob, hash: id, payer: tx.Account };
}

function checkAmount(
  tx: PaymentTx,
  requirements: PaymentRequirements,
): { reason: string; message: string } | undefined {
  const asset = requiredAsset(requirements);
  if (typeof asset === "string") return { reason: XrplReason.requirements, message: asset };
  // The binary form has only `Amount` (`DeliverMax` is its JSON alias).
  const amount = tx.Amount;
  if (
    tx.Paths !== undefined ||
    tx.DeliverMin !== undefined ||
    ((tx.Flags ?? 0) & TF_PARTIAL_PAYMENT) !== 0
  ) {
    return {
      reason: XrplReason.partialPayment,
      message:
        "Paths, DeliverMin and the partial-payment flag are not allowed: the amount must arrive exactly",
    };
  }
  if (asset.kind === "native") {
    if (typeof amount !== "string") {
      return {
        reason: XrplReason.asset,
        message: "Amount must be XRP (drops), as the requirements ask",
      };
    }
    if (tx.SendMax !== undefined) {
      return {
        reason: XrplReason.partialPayment,
        message: "SendMax is not allowed on an XRP payment",
      };
    }
    if (amount !== requirements.amount) {
      return {
        reason: XrplReason.amount,
        message: `Amount must be exactly ${requirements.amount} drops`,
      };
    }
    return undefined;
  }
  if (typeof amount !== "object" || amount === null) {
    return {
      reason: XrplReason.asset,
      message: "Amount must be the issued currency the requirements ask for",
    };
  }
  if (amount.currency !== asset.currency || amount.issuer !== asset.issuer) {
    return {
      reason: XrplReason.asset,
      message: `Amount must be currency ${asset.currency} issued by ${asset.issuer}`,
    };
  }
  const value = new BigNumber(amount.value);
  if (!value.isFinite() || !value.eq(requirements.amount)) {
    return { reason: XrplReason.amount, message: `Amount must be exactly ${requirements.amount}` };
  }
  if (tx.SendMax !== undefined) {
    const max = tx.SendMax;
    if (
      typeof max !== "object" ||
      max.currency !== asset.currency ||
      max.issuer !== asset.issuer ||
      !new BigNumber(max.value).gte(value)
    ) {
      return {
        reason: XrplReason.partialPayment,
        message: "SendMax must be the same currency and issuer, and at least the amount",
      };
    }
  }
  return undefined;
}

function checkInvoice(tx: PaymentTx, requirements: PaymentRequirements): string | undefined {
  const invoiceId = requirements.extra?.["invoiceId"];
  const memoData = (tx.Memos ?? []).map((m) => m.Memo?.MemoData?.toUpperCase());
  if (typeof invoiceId !== "string" || invoiceId === "") return undefined;
  const wantHash = invoiceHash(invoiceId);
  const wantMemo = Buffer.from(invoiceId, "utf8").toString("hex").toUpperCase();
  if (tx.InvoiceID !== undefined && tx.InvoiceID.toUpperCase() !== wantHash) {
    return "InvoiceID must be the SHA-256 of extra.invoiceId";
  }
  if (tx.InvoiceID === undefined && !memoData.includes(wantMemo)) {
    return "the payment must carry extra.invoiceId: InvoiceID set to its SHA-256, or a memo with it";
  }
  return undefined;
}
